"""Everything the training command does before the first step
(:mod:`transformer_lib.cli.train_command`): the checkpoint to resume, the job the flags
describe, the trainer built from it, and the faster kernels or ``torch.compile``."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch

from .. import fast
from ..config import TransformerConfig
from ..data.tokenizers import tokenizer_from_dict
from ..training.checkpoint import CheckpointError, load_checkpoint
from ..training.distributed import DistContext
from ..training.job import DataSpec, JobError, ModelSpec, Pairs, TrainJob
from ..training.job import prepare as prepare_job
from ..training.trainer import Trainer, TrainSettings
from .train_checks import FLAGS, UsageError, check_resume, dest, in_flags


def read_resumed(ckpt_path: Path):
    """The checkpoint to resume, or a usage error saying why it cannot be."""
    try:
        ckpt = load_checkpoint(ckpt_path)
    except CheckpointError as e:
        raise UsageError(f"--resume: {e}") from None
    missing = [
        k for k in ("config", "model", "src_tokenizer", "tgt_tokenizer", "step") if k not in ckpt
    ]
    if missing:
        raise UsageError(
            f"--resume: {ckpt_path} is not a training checkpoint (no {', '.join(missing)})"
        )
    return ckpt


def job_from(args: argparse.Namespace, ckpt_path: Path) -> TrainJob:
    """The run the flags describe, as a library :class:`TrainJob`."""
    fields = {
        part: {
            f[len(part) + 1 :]: getattr(args, dest(f)) for f in FLAGS if f.startswith(part + ".")
        }
        for part in ("data", "model", "settings")
    }
    data = DataSpec(**fields["data"])
    model = fields["model"]
    sizes = {name: value for name, value in model.items() if name != "preset" and value is not None}
    settings = TrainSettings(
        **fields["settings"], checkpoint=str(ckpt_path), progress=not args.no_progress
    )
    return TrainJob(data, ModelSpec(model["preset"], sizes), settings)


def resumed_job(
    args: argparse.Namespace, ckpt: dict, job: TrainJob, notes: List[str]
) -> Tuple[TrainJob, Dict[str, Any]]:
    """The job of a resumed run: the checkpoint's model and tokenizers (the flags that
    disagree with it add a line to ``notes``). -> (job, keyword arguments of the job's
    preparation)."""
    check_resume(args, ckpt, job, notes)
    job = dataclasses.replace(job, model=TransformerConfig(**ckpt["config"]))
    tokenizers = (
        tokenizer_from_dict(ckpt["src_tokenizer"]),
        tokenizer_from_dict(ckpt["tgt_tokenizer"]),
    )
    return job, {"tokenizers": tokenizers}


def speed_up(
    trainer: Trainer, args: argparse.Namespace, is_main: bool, device: torch.device, kernels: bool
) -> None:
    """The same model, faster: the compiled CPU kernels (``kernels``) on CPU, or
    ``torch.compile`` of the training step with ``--compile``."""
    if device.type == "cpu" and not args.compile:
        fast.accelerate(trainer.model, kernels=kernels)  # same model, faster CPU steps
    if args.compile:  # the plain model, the training step only; validation is eager
        # inductor: on a CPU, fast.compile_model's settings (PyTorch's dropout masks, no
        # bool ReLU mask), with which a compiled CPU step no longer loses to eager
        backend = {} if args.compile == "inductor" else {"backend": args.compile}
        trainer.ddp_model = fast.compile_model(trainer.ddp_model, device, dynamic=True, **backend)
        if is_main:
            how = args.compile
            if not backend and device.type == "cpu":
                how = "inductor with fast.compile_model's CPU settings"
            print(
                f"torch.compile: on (backend {how}); the first steps compile the model", flush=True
            )


def prepare(
    args: argparse.Namespace,
    ckpt_path: Path,
    dist: DistContext,
    device: torch.device,
    kernels: bool,
) -> Tuple[Trainer, Optional[Pairs]]:
    """Everything before the first step, with every check that can be made now.

    -> (trainer, test pairs or None)."""
    ckpt = read_resumed(ckpt_path) if args.resume else None
    job = job_from(args, ckpt_path)
    resumed: Dict[str, Any] = {}
    notes: List[str] = []
    if ckpt is not None:
        job, resumed = resumed_job(args, ckpt, job, notes)
    extra = {
        "command": "python -m transformer_lib.train " + shlex.join(sys.argv[1:]),
        "task": args.task or args.corpus or "corpus",
    }
    try:
        run = prepare_job(job, device=str(device), dist=dist, extra=extra, **resumed)
    except JobError as e:
        raise UsageError(in_flags(args, e.field, e.message)) from None
    notes += [f"note: {in_flags(args, field, message)}" for field, message in run.notes]
    del ckpt  # the trainer reads it again below
    if dist.is_main:
        for note in notes:
            print(note, flush=True)
    speed_up(run.trainer, args, dist.is_main, device, kernels)
    if args.resume:
        run.trainer.resume()
    return run.trainer, run.test_pairs
