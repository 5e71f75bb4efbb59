"""Checks the training command line makes before the first step: whatever would fail after
hours of training (a file where the output folder goes, validation sentences that do not
fit the model, resumed runs with other settings) is reported now, as one line naming the
flag or file."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

from ..training.precision import bf16_problem
from ..training.trainer import pick_device

# Flags a resumed run may change: they do not alter the steps already taken, nor those to
# come (validation and checkpoints only read the model; averaging has its own check).
MAY_CHANGE = ("steps", "eval_every", "eval_limit", "save_every", "average_last",
              "average_every", "time_budget")
# TrainSettings fields that are not flags of their own, or only change how it looks.
NOT_COMPARED = ("checkpoint", "decode_max_len", "bleu_tokenize", "progress", "verbose")
DATA_FLAGS = ("task", "corpus", "train_file", "n_train")      # what a resumed run trains on
MODEL_FLAGS = {"d_model": "d_model", "layers": "N", "heads": "h", "d_ff": "d_ff",
               "dropout": "P_drop", "max_len": "max_len"}


class UsageError(Exception):
    """Bad input found before training: the command line prints it as a usage error."""


def check_args(p: argparse.ArgumentParser, args) -> Path:
    """Reject contradictory or impossible arguments; return the checkpoint path."""
    sources = [f for f in ("task", "corpus", "train_file") if getattr(args, f) is not None]
    if len(sources) != 1:
        given = " and ".join("--" + f.replace("_", "-") for f in sources)
        p.error("give one of --task dates, --corpus bible-en-fr or --train-file/--valid-file"
                + (f" (not both: {given})" if sources else ""))
    if args.train_file is not None and args.valid_file is None:
        p.error("--train-file needs --valid-file")
    for flag in ("train_file", "valid_file", "test_file"):
        path = getattr(args, flag)
        if path is not None and not path.is_file():
            p.error(f"--{flag.replace('_', '-')}: no such file: {path}")
    if args.dropout is not None and not 0.0 <= args.dropout < 1.0:
        p.error(f"--dropout must be in [0, 1), got {args.dropout}")
    if not 0.0 <= args.label_smoothing < 1.0:
        p.error(f"--label-smoothing must be in [0, 1), got {args.label_smoothing}")
    if args.lr_factor <= 0:
        p.error(f"--lr-factor must be positive, got {args.lr_factor}")
    if args.override and not args.resume:
        p.error("--override only applies with --resume")
    device = check_device(p, args.device)
    if args.bf16 and (problem := bf16_problem(device)):
        p.error(f"--bf16: {problem}. Train in fp32 (leave out --bf16), or on a GPU")
    path = args.out / args.name
    if args.resume and not path.is_file():
        p.error(f"--resume: no checkpoint to resume at {path}")
    if path.exists() and not (args.resume or args.force):
        p.error(f"{path} already exists: pass --resume to continue it or --force to "
                "overwrite it")
    try:
        check_out(args.out, path)
    except UsageError as e:
        p.error(str(e))
    return path


def check_device(p: argparse.ArgumentParser, name: Optional[str]) -> torch.device:
    """The device of --device (default: CUDA when available), or a usage error saying why
    it cannot be used."""
    try:
        device = pick_device(name)
    except (RuntimeError, ValueError) as e:
        p.error(f"--device: {name!r} is not a device PyTorch knows ({str(e).splitlines()[0]}); "
                "use cpu, cuda or cuda:N")
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            p.error(f"--device {name}: this machine has no CUDA GPU that PyTorch can use "
                    f"(torch {torch.__version__}); leave out --device to train on the CPU")
        if device.index is not None and device.index >= count:
            p.error(f"--device {name}: there are {count} CUDA devices (cuda:0 .. "
                    f"cuda:{count - 1})")
    return device


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_out(out: Path, ckpt_path: Path) -> None:
    """--out must be (or become) a writable folder, and --name a file in it."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder: the checkpoint goes to "
                         f"--out/--name; give a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--out {out}: cannot create the folder ({e.strerror})") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out}: the folder is not writable")
    if ckpt_path.is_dir():
        raise UsageError(f"--name: {ckpt_path} is a folder, not a checkpoint file")


def resume_differences(ckpt: Dict[str, Any], settings: Dict[str, Any],
                       data: Dict[str, Any]) -> List[str]:
    """'--flag new (checkpoint: old)' for each setting this run would change; ``data`` is
    what the new run trains on (``DataSpec.identity()``)."""
    diffs = []
    stored = ckpt.get("settings", {})
    for name, value in settings.items():
        if name in MAY_CHANGE or name in NOT_COMPARED or name not in stored:
            continue
        if stored[name] != value:
            diffs.append(f"{flag(name)} {value} (checkpoint: {stored[name]})")
    stored_data = ckpt.get("extra", {}).get("data", {})
    for name, value in data.items():
        if name in stored_data and stored_data[name] != value:
            diffs.append(f"{flag(name)} {value} (checkpoint: {stored_data[name]})")
    return diffs


def model_differences(args, config: Dict[str, Any]) -> List[str]:
    """Model flags given with --resume that differ from the checkpoint's model."""
    diffs = []
    for name, field in MODEL_FLAGS.items():
        value = getattr(args, name)
        if value is not None and config.get(field) != value:
            diffs.append(f"{flag(name)} {value} (checkpoint: {config.get(field)})")
    return diffs


def check_resume(args, ckpt: Dict[str, Any], settings: Dict[str, Any],
                 data: Dict[str, Any], notes: List[str]) -> None:
    """Refuse a resumed run that would not continue the stored one, unless --override."""
    model = model_differences(args, ckpt.get("config", {}))
    if model:
        raise UsageError(f"--resume: the checkpoint fixes the model, and these flags differ "
                         f"from it: {', '.join(model)}; leave them out")
    diffs = resume_differences(ckpt, settings, data)
    if not diffs:
        return
    if args.override:
        notes.append(f"note: --override: continuing with {', '.join(diffs)}; the run no "
                     "longer matches an uninterrupted one")
        return
    raise UsageError(
        f"--resume: these flags differ from the checkpoint's: {', '.join(diffs)}. Give the "
        f"checkpoint's values to continue the run exactly, or add --override to use the new "
        f"ones; {', '.join(flag(n) for n in MAY_CHANGE)} may change freely")

