"""Compiled CPU dropout: the random mask made and applied in one parallel pass.

In eager PyTorch a dropout mask takes many passes over memory: the random numbers
(:func:`transformer_lib.dropout.random_words`, a dozen element-wise operations), then the
comparison, the scaling and the multiply (see ``benchmarks/README.md``). The small C++
kernel below does it all in one pass, on every thread: element ``i`` is kept when a 16-bit
slice of a counter-based random number, read as a signed integer, is at least
``round(p * 2^16) - 2^15``, so the mask depends only on a key and on ``i``. The backward
pass makes the same mask again from the key instead of storing it.

The same pass also serves the feed-forward layer: ``bias_relu_dropout_`` adds the first
layer's bias, applies ReLU and dropout in place on x W_1^T, and ``relu_dropout_backward_``
takes the gradient back through ReLU and dropout in place; with them
:class:`transformer_lib.feedforward.PositionwiseFeedForward` runs as one autograd function
while the switch is on (the same network as its plain path, two passes over the hidden
layer fewer).

The random numbers are SplitMix64's (Steele, Lea & Flood, 2014): the ``w``-th output of the
generator started at ``key`` is ``mix(key + (w + 1) * 0x9E3779B97F4A7C15)``, and one 64-bit
output gives four elements their 16 bits. Each call draws its key from PyTorch's default
generator, so ``torch.manual_seed`` still makes a run repeatable, and the mask is the same
whatever the number of threads. It is **the same mask** as the pure-PyTorch path's
(:func:`transformer_lib.dropout.keep_mask` computes the same generator with tensor
operations, from a key drawn the same way): switching the kernel on changes the speed, not
the random draws. Results agree up to floating-point rounding (the feed-forward bias is
added in another order).

The library leaves it **off by default**: it needs a C++ compiler (the kernel is built with
``torch.utils.cpp_extension`` on first use, ~30 s, then cached), which not every learner's
machine has. The training command line (``python -m transformer_lib.train``) switches it on
where it can be built, and otherwise goes on without it. Elsewhere, turn it on for long CPU
training::

    from transformer_lib.cpu_kernels import use_compiled_dropout
    use_compiled_dropout(True)          # or: with use_compiled_dropout(): ...

Only CPU tensors in training mode take it; every other case keeps
:class:`transformer_lib.dropout.Dropout`'s usual path. This module builds and loads the
kernel and holds the switch; the autograd functions around it are in
:mod:`transformer_lib.dropout` (``compiled_dropout``, ``compiled_relu_dropout``) and
:mod:`transformer_lib.feedforward`.
"""
from __future__ import annotations

import hashlib
import os
import platform
import shutil
import sys
from types import ModuleType
from typing import Optional

import torch

SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

namespace {

constexpr int64_t kBlock = 1024;              // elements per block: 256 random 64-bit words

// The w-th, w-th + 1, ... outputs of SplitMix64 started at `key`.
void random_words(uint64_t* words, uint64_t key, uint64_t first, int64_t count) {
  for (int64_t j = 0; j < count; ++j) {
    uint64_t z = key + (first + j + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    words[j] = z ^ (z >> 31);
  }
}

// Calls body(start, len, bits) for consecutive blocks of up to kBlock elements of n, on
// every thread: bits[k] holds the 16 random bits of element start + k, top bit flipped, so
// that bits[k] >= threshold exactly when the 16 bits read as a signed integer are at least
// threshold - 2^15 (the test of transformer_lib.dropout.keep_mask).
template <typename Body>
void for_each_block(int64_t n, uint64_t key, const Body& body) {
  at::parallel_for(0, (n + kBlock - 1) / kBlock, 16, [&](int64_t begin, int64_t end) {
    alignas(64) uint64_t words[kBlock / 4];
    const uint16_t* bits = reinterpret_cast<const uint16_t*>(words);  // 4 per word
    for (int64_t block = begin; block < end; ++block) {
      const int64_t start = block * kBlock;
      const int64_t len = std::min(kBlock, n - start);
      const int64_t count = (len + 3) / 4;
      random_words(words, key, static_cast<uint64_t>(start / 4), count);
      for (int64_t j = 0; j < count; ++j) words[j] ^= 0x8000800080008000ULL;
      body(start, len, bits);
    }
  });
}

// out[i] = x[i] * scale where element i is kept, else 0; with_relu: max(that, 0).
template <typename T, bool with_relu>
void masked(const T* x_ptr, T* out_ptr, int64_t n, uint32_t threshold, float scale_arg,
            uint64_t key) {
  using acc_t = at::opmath_type<T>;
  const acc_t scale = static_cast<acc_t>(scale_arg);
  for_each_block(n, key, [=](int64_t start, int64_t len, const uint16_t* __restrict__ bits) {
    // Local restrict pointers and local copies (not the closure's members): the compiler
    // then knows the stores to `out` change nothing else, and vectorises the loop.
    const T* __restrict__ x = x_ptr + start;
    T* __restrict__ out = out_ptr + start;
    const uint32_t t = threshold;
    const acc_t s = scale;
    for (int64_t k = 0; k < len; ++k) {
      acc_t v = bits[k] >= t ? static_cast<acc_t>(x[k]) * s : acc_t(0);
      if (with_relu) v = std::max(v, acc_t(0));
      out[k] = static_cast<T>(v);
    }
  });
}

// In place: h[r, c] = ReLU((h[r, c] + bias[c]) * scale) where element r * cols + c is kept,
// else 0 (the feed-forward layer's bias, ReLU and dropout in one pass). Row by row within a
// block, so that the inner loop runs along the bias and vectorises.
template <typename T>
void bias_relu_masked(T* h_ptr, const T* bias_ptr, int64_t n, int64_t cols, uint32_t threshold,
                      float scale_arg, uint64_t key) {
  using acc_t = at::opmath_type<T>;
  const acc_t scale = static_cast<acc_t>(scale_arg);
  for_each_block(n, key, [=](int64_t start, int64_t len, const uint16_t* __restrict__ bits) {
    const uint32_t t = threshold;                                     // locals, as in masked
    const acc_t s = scale;
    for (int64_t k = 0; k < len;) {
      const int64_t col = (start + k) % cols;
      const int64_t run_len = std::min(len - k, cols - col);        // to the end of the row
      T* __restrict__ h = h_ptr + start + k;
      const T* __restrict__ bias = bias_ptr + col;
      const uint16_t* __restrict__ b = bits + k;
      for (int64_t j = 0; j < run_len; ++j) {
        const acc_t v = (static_cast<acc_t>(h[j]) + static_cast<acc_t>(bias[j])) * s;
        h[j] = static_cast<T>(b[j] >= t ? std::max(v, acc_t(0)) : acc_t(0));
      }
      k += run_len;
    }
  });
}

void check_threshold(int64_t threshold) {
  TORCH_CHECK(threshold >= 0 && threshold <= 65536,
              "compiled dropout: threshold must be in [0, 65536], got ", threshold);
}

template <bool with_relu>
torch::Tensor run(const torch::Tensor& input, int64_t threshold, double scale, int64_t key) {
  TORCH_CHECK(input.device().is_cpu(), "compiled dropout: expected a CPU tensor, got ",
              input.device());
  check_threshold(threshold);
  const torch::Tensor x = input.contiguous();
  torch::Tensor out = torch::empty_like(x, at::MemoryFormat::Contiguous);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "dropout", [&] {
    masked<scalar_t, with_relu>(x.const_data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
                                x.numel(), static_cast<uint32_t>(threshold),
                                static_cast<float>(scale), static_cast<uint64_t>(key));
  });
  return out;
}

}  // namespace

torch::Tensor dropout(const torch::Tensor& x, int64_t threshold, double scale, int64_t key) {
  return run<false>(x, threshold, scale, key);
}

torch::Tensor relu_dropout(const torch::Tensor& x, int64_t threshold, double scale,
                           int64_t key) {
  return run<true>(x, threshold, scale, key);
}

// In place on h (rows x bias.numel(), contiguous): Dropout(ReLU(h + bias)); returns h.
torch::Tensor bias_relu_dropout_(torch::Tensor h, const torch::Tensor& bias, int64_t threshold,
                                 double scale, int64_t key) {
  TORCH_CHECK(h.device().is_cpu() && h.is_contiguous() && bias.is_contiguous() &&
              bias.dim() == 1 && h.size(-1) == bias.numel() && h.dtype() == bias.dtype(),
              "bias_relu_dropout_: expected a contiguous CPU h of shape (..., n) and a bias of "
              "shape (n,) in the same dtype, got ", h.sizes(), " and ", bias.sizes());
  check_threshold(threshold);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, h.scalar_type(), "dropout", [&] {
    bias_relu_masked<scalar_t>(h.data_ptr<scalar_t>(), bias.const_data_ptr<scalar_t>(),
                               h.numel(), bias.numel(), static_cast<uint32_t>(threshold),
                               static_cast<float>(scale), static_cast<uint64_t>(key));
  });
  return h;
}

// In place on grad: grad * scale where y > 0, else 0 (backward of a ReLU + dropout whose
// output is y); returns grad.
torch::Tensor relu_dropout_backward_(torch::Tensor grad, const torch::Tensor& y, double scale) {
  TORCH_CHECK(grad.device().is_cpu() && grad.is_contiguous() && y.is_contiguous() &&
              grad.sizes() == y.sizes() && grad.dtype() == y.dtype(),
              "relu_dropout_backward_: expected contiguous CPU tensors of one shape and dtype");
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, grad.scalar_type(), "dropout", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    scalar_t* g_ptr = grad.data_ptr<scalar_t>();
    const scalar_t* y_ptr = y.const_data_ptr<scalar_t>();
    const acc_t s = static_cast<acc_t>(scale);
    at::parallel_for(0, grad.numel(), 16384, [=](int64_t begin, int64_t end) {
      scalar_t* __restrict__ g = g_ptr + begin;
      const scalar_t* __restrict__ out = y_ptr + begin;
      for (int64_t i = 0; i < end - begin; ++i) {
        const acc_t v = static_cast<acc_t>(g[i]) * s;     // computed for every i: vectorises
        g[i] = static_cast<scalar_t>(static_cast<acc_t>(out[i]) > acc_t(0) ? v : acc_t(0));
      }
    });
  });
  return grad;
}
"""

_enabled = False
_module: Optional[ModuleType] = None


def _build_name() -> str:
    """One build per source, PyTorch version and CPU: the kernel is compiled for this CPU
    (``-march=native``), so a cache shared between machines must not mix them up."""
    cpu = platform.machine() + platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu += next((line for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        pass
    digest = hashlib.sha1(f"{SOURCE}{torch.__version__}{cpu}".encode()).hexdigest()[:12]
    return f"transformer_lib_dropout_{digest}"


def _compiler_flags() -> list:
    """Optimise for this CPU; OpenMP (the threads of ``at::parallel_for``) on Linux only.
    Apple's clang rejects ``-fopenmp``: built without it, the kernel runs on one thread,
    with the same masks."""
    flags = ["-O3", "-march=native"]
    return flags + ["-fopenmp"] if sys.platform.startswith("linux") else flags


def load() -> ModuleType:
    """The compiled kernels, built on first use (~30 s) and cached by PyTorch.

    Raises:
        RuntimeError: naming what is missing (a C++ compiler, ninja) or why the build failed.
    """
    global _module
    if _module is not None:
        return _module
    if shutil.which("ninja") is None:
        try:                                    # the `ninja` package from PyPI
            import ninja
            os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
        except ImportError:
            raise RuntimeError("compiled dropout needs the ninja build tool: "
                               "pip install ninja") from None
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        raise RuntimeError("compiled dropout needs a C++ compiler (c++, or the one named by "
                           "$CXX); install one, or leave compiled dropout off")
    from torch.utils.cpp_extension import load_inline
    try:
        _module = load_inline(_build_name(), cpp_sources=SOURCE,
                              functions=["dropout", "relu_dropout", "bias_relu_dropout_",
                                         "relu_dropout_backward_"],
                              extra_cflags=_compiler_flags())
    except Exception as e:                      # compiler errors come as RuntimeError/OSError
        raise RuntimeError(f"building the compiled dropout kernel failed ({e.__class__.__name__})"
                           f"; leave compiled dropout off. Details:\n{e}") from e
    return _module


def enabled() -> bool:
    """Whether :class:`transformer_lib.dropout.Dropout` uses the compiled kernel on the CPU."""
    return _enabled


class use_compiled_dropout:
    """Turn the compiled CPU dropout on (or off), for good or, as a context manager, for a
    ``with`` block. Turning it on builds the kernel now, so a missing compiler is reported
    here and not in the middle of training.

    >>> use_compiled_dropout(True)                       # doctest: +SKIP
    >>> with use_compiled_dropout(False): ...            # doctest: +SKIP
    """

    def __init__(self, enable: bool = True):
        if not isinstance(enable, bool):
            raise TypeError(f"enable must be True or False, got {enable!r}")
        global _enabled
        if enable:
            load()
        self.previous, _enabled = _enabled, enable

    def __enter__(self) -> "use_compiled_dropout":
        return self

    def __exit__(self, *exc) -> None:
        global _enabled
        _enabled = self.previous
