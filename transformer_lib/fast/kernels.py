"""Build and load the compiled CPU kernels (``kernels.cpp``) of :mod:`transformer_lib.fast`.

**Dropout.** In eager PyTorch a dropout mask takes many passes over memory: the random
numbers (:func:`transformer_lib.fast.dropout.random_words`, a dozen element-wise operations),
then the comparison, the scaling and the multiply (see ``benchmarks/README.md``). The C++
kernel does it all in one pass, on every thread: element ``i`` is kept when a 16-bit slice
of a counter-based random number, read as a signed integer, is at least
``round(p * 2^16) - 2^15``, so the mask depends only on a key and on ``i``. The backward pass
makes the same mask again from the key instead of storing it. It is **the same mask** as the
pure-PyTorch :func:`transformer_lib.fast.dropout.keep_mask` (the same generator, SplitMix64,
from a key drawn the same way from PyTorch's generator).

**The feed-forward layer.** ``bias_relu_dropout_`` adds the first layer's bias, applies ReLU
and dropout in place on x W_1^T, and ``relu_dropout_backward_`` takes the gradient back
through ReLU and dropout in place (:mod:`transformer_lib.fast.feedforward`).

**Attention.** ``attention_forward`` and ``attention_backward`` compute every head's
softmax(Q K^T / sqrt(d_k)) V and its gradients with MKL's batched matrix multiply, reading
each head in place from the projections' outputs: no head is split off or merged with a
copy (:mod:`transformer_lib.fast.attention`). Where PyTorch has no MKL batched multiply, or
off Linux, :func:`attention_available` is False and attention keeps PyTorch's fused kernel.

The kernels are built with ``torch.utils.cpp_extension`` on first use (~30 s, then cached);
they need a C++ compiler and the ``ninja`` build tool.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Optional

import torch

SOURCE_FILE = Path(__file__).with_name("kernels.cpp")  # the C++ kernels

_module: Optional[ModuleType] = None


def _build_name(source: str) -> str:
    """One build per source, PyTorch installation and CPU: the kernel is compiled for this
    CPU (``-march=native``) against this PyTorch's headers and libraries, so a cache shared
    between machines or environments must not mix them up (each would rebuild it in turn)."""
    cpu = platform.machine() + platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu += next((line for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        pass
    where = f"{torch.__version__}{torch.__file__}"  # the installation, its headers
    digest = hashlib.sha1(f"{source}{where}{cpu}".encode()).hexdigest()[:12]
    return f"transformer_lib_kernels_{digest}"


def _compiler_flags() -> list:
    """Optimise for this CPU; OpenMP (the threads of ``at::parallel_for``) on Linux only.
    Apple's clang rejects ``-fopenmp``: built without it, the kernel runs on one thread,
    with the same masks."""
    flags = ["-O3", "-march=native"]
    return flags + ["-fopenmp"] if sys.platform.startswith("linux") else flags


BUILD_WAIT_S = 900  # how long to wait for another process building the same kernels
STALE_LOCK_S = 600  # a build lock this old was left by a build that was killed


def _wait_for_stale_lock(lock: Path, stale_s: float = STALE_LOCK_S) -> None:
    """Wait while ``lock`` (PyTorch's build lock) is held by a live build; remove it once it
    is older than ``stale_s`` seconds, when its build was killed and it would block forever."""
    while True:
        try:
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            return
        if age > stale_s:
            lock.unlink(missing_ok=True)
            return
        time.sleep(0.5)


@contextlib.contextmanager
def _build_lock(build_dir: Path, wait_s: float = BUILD_WAIT_S):
    """Only one process builds; and no build waits forever on a stale lock.

    PyTorch's ``load_inline`` serialises builds with a ``lock`` file that a killed build
    (Ctrl-C, SIGKILL, out of memory) leaves behind, and every later build then waits for it
    forever (pytorch/pytorch#189245). This takes an operating-system lock first, which the
    kernel releases when its holder dies, and treats a ``lock`` file older than
    ``STALE_LOCK_S`` as left by a killed build."""
    build_dir.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # not on a POSIX system: PyTorch's lock only
        yield
        return
    with open(build_dir / "build.flock", "w") as handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"another process has been building the compiled CPU "
                        f"kernels in {build_dir} for over {wait_s:.0f} s; "
                        f"stop it, or leave the kernels off"
                    ) from None
                time.sleep(0.5)
        try:
            _wait_for_stale_lock(build_dir / "lock")
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _check_build_tools() -> None:
    """The ninja build tool (the PyPI package's, put on PATH, if none is installed) and a
    C++ compiler, or a RuntimeError naming the one missing."""
    if shutil.which("ninja") is None:
        try:  # the `ninja` package from PyPI
            import ninja

            os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
        except ImportError:
            raise RuntimeError(
                "the compiled CPU kernels need the ninja build tool: pip install ninja"
            ) from None
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        raise RuntimeError(
            "the compiled CPU kernels need a C++ compiler (c++, or the one named "
            "by $CXX); install one, or leave them off"
        )


def load() -> ModuleType:
    """The compiled kernels, built on first use (~30 s) and cached by PyTorch.

    Raises:
        RuntimeError: naming what is missing (a C++ compiler, ninja) or why the build failed.
    """
    global _module
    if _module is not None:
        return _module
    _check_build_tools()
    from torch.utils.cpp_extension import _get_build_directory, load_inline

    source = SOURCE_FILE.read_text()
    name = _build_name(source)
    build_dir = Path(_get_build_directory(name, verbose=False))
    with _build_lock(build_dir):
        try:
            _module = load_inline(
                name,
                cpp_sources=source,
                functions=[
                    "dropout",
                    "relu_dropout",
                    "bias_relu_dropout_",
                    "relu_dropout_backward_",
                    "attention_kernel_available",
                    "attention_forward",
                    "attention_backward",
                ],
                extra_cflags=_compiler_flags(),
                build_directory=str(build_dir),
            )
        except Exception as e:  # compiler errors come as RuntimeError/OSError
            raise RuntimeError(
                f"building the compiled CPU kernels failed "
                f"({e.__class__.__name__}); leave them off. Details:\n{e}"
            ) from e
    return _module


def attention_available() -> bool:
    """Whether the compiled attention kernel can run here: it needs MKL's batched matrix
    multiply, which PyTorch's x86 Linux builds carry. Builds the kernels if need be."""
    return bool(load().attention_kernel_available())
