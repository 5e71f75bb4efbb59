"""Compiled CPU kernels for training: dropout, the feed-forward layer and attention.

**Dropout.** In eager PyTorch a dropout mask takes many passes over memory: the random
numbers (:func:`transformer_lib.dropout.random_words`, a dozen element-wise operations), then
the comparison, the scaling and the multiply (see ``benchmarks/README.md``). The small C++
kernel in ``cpu_kernels.cpp`` does it all in one pass, on every thread: element ``i`` is kept
when a 16-bit slice of a counter-based random number, read as a signed integer, is at least
``round(p * 2^16) - 2^15``, so the mask depends only on a key and on ``i``. The backward
pass makes the same mask again from the key instead of storing it.

The random numbers are SplitMix64's (Steele, Lea & Flood, 2014): the ``w``-th output of the
generator started at ``key`` is ``mix(key + (w + 1) * 0x9E3779B97F4A7C15)``, and one 64-bit
output gives four elements their 16 bits. Each call draws its key from PyTorch's default
generator, so ``torch.manual_seed`` still makes a run repeatable, and the mask is the same
whatever the number of threads. It is **the same mask** as the pure-PyTorch path's
(:func:`transformer_lib.dropout.keep_mask` computes the same generator with tensor
operations, from a key drawn the same way): switching the kernels on changes the speed, not
the random draws.

**The feed-forward layer.** The same pass serves it: ``bias_relu_dropout_`` adds the first
layer's bias, applies ReLU and dropout in place on x W_1^T, and ``relu_dropout_backward_``
takes the gradient back through ReLU and dropout in place; with them
:class:`transformer_lib.feedforward.PositionwiseFeedForward` runs as one autograd function
(the same network as its plain path, two passes over the hidden layer fewer).

**Attention.** ``attention_forward`` and ``attention_backward`` compute every head's
softmax(Q K^T / sqrt(d_k)) V and its gradients with MKL's batched matrix multiply, reading
each head's queries, keys and values in place from the projections' outputs: no head is
split off or merged with a copy, and the backward pass writes the gradients of W^Q, W^K and
W^V's outputs into one buffer (no ``cat``). It keeps the attention weights for the backward
pass, so :class:`transformer_lib.attention.MultiHeadAttention` uses it for fp32 weights
(under CPU autocast too, computing in fp32 like the fused path), sequences of up to
128 x 128 scores and no dropout on the weights, and PyTorch's fused kernel otherwise.
Where PyTorch has no MKL batched multiply, or off Linux (:func:`attention_available` is
False), attention keeps PyTorch's kernel and the other two kernels still run.

With the kernels on, results agree with the plain path up to floating-point rounding (the
feed-forward bias and the attention sums are added in another order); tests check both.

The library leaves them **off by default**: they need a C++ compiler (the kernels are built
with ``torch.utils.cpp_extension`` on first use, ~30 s, then cached), which not every
learner's machine has. The training command line (``python -m transformer_lib.train``)
switches them on for CPU training where they can be built, and otherwise goes on without
them. Elsewhere, turn them on for long CPU training::

    from transformer_lib.cpu_kernels import use_compiled_kernels
    use_compiled_kernels(True)          # or: with use_compiled_kernels(): ...

Only CPU tensors take them (dropout and the feed-forward layer only in training, with
0 < p < 1); every other case keeps the modules' usual paths. This module builds and loads the kernels and holds the switch; the
autograd functions around them are in :mod:`transformer_lib.dropout` (``compiled_dropout``,
``compiled_relu_dropout``), :mod:`transformer_lib.feedforward` and
:mod:`transformer_lib.attention`.
"""
from __future__ import annotations

import hashlib
import os
import platform
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Optional

import torch

SOURCE = Path(__file__).with_name("cpu_kernels.cpp").read_text()      # the C++ kernels

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
    return f"transformer_lib_kernels_{digest}"


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
            raise RuntimeError("the compiled CPU kernels need the ninja build tool: "
                               "pip install ninja") from None
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        raise RuntimeError("the compiled CPU kernels need a C++ compiler (c++, or the one named "
                           "by $CXX); install one, or leave them off")
    from torch.utils.cpp_extension import load_inline
    try:
        _module = load_inline(_build_name(), cpp_sources=SOURCE,
                              functions=["dropout", "relu_dropout", "bias_relu_dropout_",
                                         "relu_dropout_backward_",
                                         "attention_kernel_available", "attention_forward",
                                         "attention_backward"],
                              extra_cflags=_compiler_flags())
    except Exception as e:                      # compiler errors come as RuntimeError/OSError
        raise RuntimeError(f"building the compiled CPU kernels failed ({e.__class__.__name__})"
                           f"; leave them off. Details:\n{e}") from e
    return _module


def attention_available() -> bool:
    """Whether the compiled attention kernel can run here: it needs MKL's batched matrix
    multiply, which PyTorch's x86 Linux builds carry. Builds the kernels if need be."""
    return bool(load().attention_kernel_available())


def enabled() -> bool:
    """Whether the compiled CPU kernels are switched on (:class:`use_compiled_kernels`)."""
    return _enabled


class use_compiled_kernels:
    """Turn the compiled CPU kernels on (or off), for good or, as a context manager, for a
    ``with`` block. Turning them on builds them now, so a missing compiler is reported
    here and not in the middle of training.

    >>> use_compiled_kernels(True)                       # doctest: +SKIP
    >>> with use_compiled_kernels(False): ...            # doctest: +SKIP
    """

    def __init__(self, enable: bool = True):
        if not isinstance(enable, bool):
            raise TypeError(f"enable must be True or False, got {enable!r}")
        global _enabled
        if enable:
            load()
        self.previous, _enabled = _enabled, enable

    def __enter__(self) -> "use_compiled_kernels":
        return self

    def __exit__(self, *exc) -> None:
        global _enabled
        _enabled = self.previous
