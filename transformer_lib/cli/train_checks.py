"""Checks the training command line makes before the first step: whatever would fail after
hours of training (a file where the output folder goes, validation sentences that do not
fit the model, resumed runs with other settings) is reported now, as one line naming the
flag or file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch

from ..training.job import TrainJob
from ..training.job_resume import MAY_CHANGE, Difference, resume_differences
from ..training.precision import bf16_problem
from ..training.trainer import pick_device
from .args import device_problem, folder_problem

# The job's fields and the flags that set them: the one map from the library's names to the
# command line's, for building the job (:func:`~.train_setup.job_from`) and naming flags
# in messages.
FLAGS = {
    "data.task": "--task",
    "data.corpus": "--corpus",
    "data.train_file": "--train-file",
    "data.valid_file": "--valid-file",
    "data.test_file": "--test-file",
    "data.n_train": "--n-train",
    "data.n_valid": "--n-valid",
    "data.n_test": "--n-test",
    "data.vocab_size": "--vocab-size",
    "model.preset": "--preset",
    "model.d_model": "--d-model",
    "model.N": "--layers",
    "model.h": "--heads",
    "model.d_ff": "--d-ff",
    "model.P_drop": "--dropout",
    "model.max_len": "--max-len",
    "model.norm_first": "--norm-first",
    "settings.steps": "--steps",
    "settings.max_tokens": "--max-tokens",
    "settings.warmup": "--warmup",
    "settings.lr_factor": "--lr-factor",
    "settings.label_smoothing": "--label-smoothing",
    "settings.cooldown": "--cooldown",
    "settings.eval_every": "--eval-every",
    "settings.eval_limit": "--eval-limit",
    "settings.save_every": "--save-every",
    "settings.average_last": "--average-last",
    "settings.average_every": "--average-every",
    "settings.time_budget": "--time-budget",
    "settings.seed": "--seed",
    "settings.bf16": "--bf16",
    "settings.keep_freed_memory": "--keep-freed-memory",
}


def dest(field: str) -> str:
    """The argparse attribute of a job field's flag (``model.N`` -> ``layers``)."""
    return FLAGS[field][2:].replace("-", "_")


class UsageError(Exception):
    """Bad input found before training: the command line prints it as a usage error."""


def check_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> Path:
    """Reject contradictory or impossible arguments; return the checkpoint path."""
    sources = [
        FLAGS[f"data.{f}"] for f in ("task", "corpus", "train_file") if getattr(args, f) is not None
    ]
    if len(sources) != 1:
        p.error(
            "give one of --task dates, --corpus bible-en-fr or --train-file/--valid-file"
            + (f" (not both: {' and '.join(sources)})" if sources else "")
        )
    if args.train_file is not None and args.valid_file is None:
        p.error("--train-file needs --valid-file")
    for split in ("train", "valid", "test"):
        path = getattr(args, f"{split}_file")
        if path is not None and not path.is_file():
            p.error(f"{FLAGS[f'data.{split}_file']}: no such file: {path}")
    if not args.name.strip() or Path(args.name).name != args.name:
        p.error(f"--name must be a file name (the checkpoint goes into --out), got {args.name!r}")
    if args.override and not args.resume:
        p.error("--override only applies with --resume")
    device = check_device(p, args.device)
    if args.bf16 and (problem := bf16_problem(device)):
        p.error(f"--bf16: {problem}. Train in fp32 (leave out --bf16), or on a GPU")
    path = args.out / args.name
    if args.resume and not path.is_file():
        p.error(f"--resume: no checkpoint to resume at {path}")
    if path.exists() and not (args.resume or args.force):
        p.error(f"{path} already exists: pass --resume to continue it or --force to overwrite it")
    try:
        check_out(args.out, path)
    except UsageError as e:
        p.error(str(e))
    return path


def check_device(p: argparse.ArgumentParser, name: Optional[str]) -> torch.device:
    """The device of --device, or a usage error saying why it cannot be used."""
    problem = device_problem(name)
    if problem is not None:
        p.error(problem)
    return pick_device(name)


def check_out(out: Path, ckpt_path: Path) -> None:
    """--out must be (or become) a writable folder, and --name a file in it."""
    problem = folder_problem("--out", out)
    if problem is not None:
        raise UsageError(problem)
    if ckpt_path.is_dir():
        raise UsageError(f"--name: {ckpt_path} is a folder, not a checkpoint file")


def where(args: argparse.Namespace, field: str) -> Tuple[str, str]:
    """(what the user gave, separator) for a job field, to name flags in messages."""
    split = {
        "train": ("--train-file", args.train_file),
        "valid": ("--valid-file", args.valid_file),
        "test": ("--test-file", args.test_file),
    }
    if field.startswith("data.") and field[5:] in split:
        name, path = split[field[5:]]
        if path is not None:
            return f"{name} {path}", ": "
        if field == "data.train":
            return (f"--corpus {args.corpus}" if args.corpus else "--task dates"), ": "
        return f"the {'validation' if field == 'data.valid' else 'test'} split", ": "
    if field == "model":
        given = " ".join(
            f"{flag} {getattr(args, dest(f))}"
            for f, flag in FLAGS.items()
            if f.startswith("model.") and f != "model.preset" and getattr(args, dest(f)) is not None
        )
        return f"--preset {args.preset} {given}".strip(), ": "
    if field == "data.corpus":
        return f"--corpus {args.corpus}", ": "
    if field in FLAGS:
        return FLAGS[field], (": " if field.endswith("_file") else " ")
    return field, ": "


def in_flags(args: argparse.Namespace, field: str, message: str) -> str:
    prefix, sep = where(args, field)
    return f"{prefix}{sep}{message}"


def listed(differences: List[Difference]) -> str:
    return ", ".join(
        f"{FLAGS.get(d.field, d.field)} {d.new} (checkpoint: {d.stored})" for d in differences
    )


def check_resume(
    args: argparse.Namespace, ckpt: Dict[str, Any], job: TrainJob, notes: List[str]
) -> None:
    """Refuse a resumed run that would not continue the stored one (another model, or
    other data or settings without --override), or that would train nothing."""
    differences = resume_differences(ckpt, job)
    model = [d for d in differences if d.fixed]
    if model:
        raise UsageError(
            f"--resume: the checkpoint fixes the model, and these flags differ "
            f"from it: {listed(model)}; leave them out"
        )
    step = ckpt["step"]
    if step > args.steps:
        raise UsageError(
            f"--resume: the checkpoint {args.out / args.name} is already at step "
            f"{step}, beyond --steps {args.steps}: nothing to train; give "
            f"--steps above {step} to go on"
        )
    if not differences:
        return
    if args.override:
        notes.append(
            f"note: --override: continuing with {listed(differences)}; the run no "
            "longer matches an uninterrupted one"
        )
        return
    free = ", ".join(flag for f, flag in FLAGS.items() if f in MAY_CHANGE)
    raise UsageError(
        f"--resume: these flags differ from the checkpoint's: {listed(differences)}. Give "
        f"the checkpoint's values to continue the run exactly, or add --override to use the "
        f"new ones; {free} may change freely"
    )
