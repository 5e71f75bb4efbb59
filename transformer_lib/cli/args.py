"""Argument types shared by the command lines: argparse turns their errors into one usage
line naming the flag (``argument --seed: must be at most 4294967295, got -1``)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Callable, Optional

from ..checks import check_float, check_int


def _checked(parse: Callable, check: Callable, what: str, **bounds) -> Callable[[str], object]:
    def convert(text: str):
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        try:
            return check(value, "", **bounds)
        except ValueError as e:  # "  must be at least 1, got 0"
            raise argparse.ArgumentTypeError(str(e).strip()) from None

    convert.__name__ = what  # argparse's fallback message names it
    return convert


def int_in(minimum: int, maximum: Optional[int] = None) -> Callable[[str], object]:
    """An integer in [minimum, maximum]."""
    return _checked(int, check_int, "an integer", minimum=minimum, maximum=maximum)


def float_in(
    minimum: Optional[float] = None,
    maximum: Optional[float] = None,
    min_open: bool = False,
    max_open: bool = False,
) -> Callable[[str], object]:
    """A finite number in the range (NaN and infinities are refused)."""
    return _checked(
        float,
        check_float,
        "a number",
        minimum=minimum,
        maximum=maximum,
        min_open=min_open,
        max_open=max_open,
    )


positive_int = int_in(1)
non_negative_int = int_in(0)
positive_float = float_in(0.0, min_open=True)


def folder(text: str) -> Path:
    """A folder path; the empty string is refused (it would mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            f"must name a folder, got {text!r} (use . for the current folder)"
        )
    return Path(text)


def folder_problem(flag: str, out: Path) -> Optional[str]:
    """Why ``out`` cannot be (made) a writable folder, naming ``flag``; None once it is one
    (it is created, with its parents)."""
    if out.exists() and not out.is_dir():
        return f"{flag} {out} is a file, not a folder; give a folder"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return f"{flag} {out}: cannot create the folder ({e.strerror})"
    if not os.access(out, os.W_OK | os.X_OK):
        return f"{flag} {out}: the folder is not writable"
    return None


def device_problem(name: Optional[str]) -> Optional[str]:
    """Why ``--device name`` cannot run the model on this machine (a sentence naming the
    flag), or None. Default (None): CUDA when available, else the CPU."""
    import torch

    from ..training.settings import pick_device

    try:
        device = pick_device(name)
    except (RuntimeError, ValueError) as e:
        return (
            f"--device: {name!r} is not a device PyTorch knows "
            f"({str(e).splitlines()[0]}); use cpu, cuda or cuda:N"
        )
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            return (
                f"--device {name}: this machine has no CUDA GPU that PyTorch can use "
                f"(torch {torch.__version__}); leave out --device to run on the CPU"
            )
        if device.index is not None and device.index >= count:
            return f"--device {name}: there are {count} CUDA devices (cuda:0 .. cuda:{count - 1})"
    elif device.type == "mps":
        if not torch.backends.mps.is_available():
            return (
                f"--device {name}: this machine has no Apple GPU (MPS) that PyTorch can "
                "use; leave out --device to run on the CPU"
            )
    elif device.type != "cpu":
        return (
            f"--device {name}: the model runs on cpu, cuda[:N] or mps, not on "
            f"{device.type!r} devices"
        )
    return None
