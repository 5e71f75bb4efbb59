"""Train a Transformer from the command line: ``python -m transformer_lib.train``.

Examples::

    # the built-in date task, a small model, on this machine's CPU or GPU
    python -m transformer_lib.train --task dates --steps 3000 --out runs/dates
    # a parallel corpus (one "source<TAB>target" pair a line), BPE vocabulary of 8000
    python -m transformer_lib.train --train-file train.tsv --valid-file valid.tsv \\
        --vocab-size 8000 --preset base --steps 100000 --max-tokens 25000 --out runs/base
    # two processes on one machine (DDP; gloo on CPU, NCCL on GPUs)
    torchrun --nproc_per_node=2 -m transformer_lib.train --task dates --out runs/ddp
    # without the compiled CPU kernels (used by default where a C++ compiler can build them)
    python -m transformer_lib.train --task dates --out runs/plain --no-compiled-kernels
    # continue a run where it stopped
    python -m transformer_lib.train --task dates --steps 6000 --out runs/dates --resume

Ctrl-C (or SIGTERM) stops after the current step, writes a checkpoint of it and prints the
command that resumes; a second one stops at once, keeping the last complete checkpoint.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch

from .. import fast
from ..config import TransformerConfig
from ..training.checkpoint import CheckpointError, load_checkpoint
from ..training.distributed import DistContext, cleanup, init_distributed
from ..training.metrics import evaluate_translation
from ..data.tokenizers import tokenizer_from_dict
from ..training.job import DataSpec, JobError, ModelSpec, Pairs, TrainJob
from ..training.job import prepare as prepare_job
from ..training.trainer import Trainer, TrainSettings, pick_device
from .stopping import (
    GracefulStop,
    diverged,
    failed_save,
    resume_command,
    signals_interrupt,
    stopped,
    stopped_at_once,
)
from .train_args import train_parser
from .train_checks import FLAGS, UsageError, check_args, check_resume, dest, in_flags


def build_parser() -> argparse.ArgumentParser:
    return train_parser(__doc__)


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
        check_resume(args, ckpt, job, notes)
        job = dataclasses.replace(job, model=TransformerConfig(**ckpt["config"]))
        resumed = {
            "tokenizers": (
                tokenizer_from_dict(ckpt["src_tokenizer"]),
                tokenizer_from_dict(ckpt["tgt_tokenizer"]),
            )
        }
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
    if device.type == "cpu" and not args.compile:
        fast.accelerate(run.trainer.model, kernels=kernels)  # same model, faster CPU steps
    if args.compile:  # the plain model, the training step only; validation is eager
        run.trainer.ddp_model = torch.compile(  # type: ignore[assignment]
            run.trainer.ddp_model, backend=args.compile, dynamic=True
        )
        if dist.is_main:
            print(
                f"torch.compile: on (backend {args.compile}); the first steps compile the model",
                flush=True,
            )
    if args.resume:
        run.trainer.resume()
    return run.trainer, run.test_pairs


@dataclasses.dataclass
class Running:
    """The command's run as far as it got: ``trainer`` is set as soon as it exists, for the
    messages of an interrupted or failed run."""

    trainer: Optional[Trainer] = None


def run(
    args: argparse.Namespace,
    ckpt_path: Path,
    kernels: bool = False,
    running: Optional[Running] = None,
) -> Trainer:
    """Train; ``running.trainer`` holds the trainer as soon as it exists."""
    device = pick_device(args.device)
    dist = init_distributed(device.type)
    if dist.enabled and device.type == "cuda":
        device = torch.device("cuda", dist.local_rank)
    trainer, test_pairs = prepare(args, ckpt_path, dist, device, kernels)
    if running is not None:
        running.trainer = trainer
    if dist.enabled:
        torch.manual_seed(args.seed + 1000 * dist.rank + trainer.step)  # own dropout per rank
    start, first = time.perf_counter(), trainer.step
    with GracefulStop(trainer, announce=dist.is_main):
        trainer.fit()
    if dist.is_main and trainer.step > first:
        print(
            f"trained steps {first + 1}-{trainer.step} in {time.perf_counter() - start:.1f} s "
            "(validation included)"
        )
    if test_pairs is not None and dist.is_main and trainer.stop_signal is None:
        src_tok, tgt_tok = trainer.src_tok, trainer.tgt_tok
        scores = evaluate_translation(
            trainer.model,
            test_pairs,
            src_tok,
            tgt_tok,
            trainer.settings.decode_max_len,
            trainer.settings.bleu_tokenize,
            trainer.device,
        )
        trainer.extra["test"] = {
            "exact_match": scores["exact_match"],
            "bleu": scores["bleu"],
            "n": len(test_pairs),
        }
        trainer.save()
        print(
            f"test: exact match {100 * scores['exact_match']:.2f}%  "
            f"BLEU {scores['bleu']:.2f}  ({len(test_pairs)} pairs)"
        )
    cleanup(dist)
    return trainer


def wants_compiled_kernels(parser: argparse.ArgumentParser, args: argparse.Namespace) -> bool:
    """Whether this run uses the compiled CPU kernels; builds them now (once), not
    mid-training.

    ``--compiled-kernels``: yes, or a usage error naming the flag if they cannot be built.
    ``--no-compiled-kernels``: no. Neither (the default): yes for CPU training where they
    can be built, else a one-line note and PyTorch's own kernels (the same masks, slower).
    """
    if args.compile and args.compiled_kernels:
        parser.error("--compiled-kernels: not with --compile (torch.compile makes its own kernels)")
    if args.compiled_kernels is False or args.compile:
        return False
    if args.compiled_kernels is None and pick_device(args.device).type != "cpu":
        return False  # the kernels are for CPU tensors
    main_process = os.environ.get("RANK", "0") == "0"
    if main_process:
        print("compiled CPU kernels: loading (the first run builds them, ~30 s) ...", flush=True)
    problem = fast.kernels_available()
    if problem is not None:
        if args.compiled_kernels:
            parser.error(f"--compiled-kernels: {problem}")
        if main_process:
            print(
                f"compiled CPU kernels: off ({problem}); the same training with PyTorch's "
                "own kernels (--no-compiled-kernels skips this)"
            )
        return False
    if main_process:
        print("compiled CPU kernels: on (--no-compiled-kernels: PyTorch's own kernels)")
    return True


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    ckpt_path = check_args(parser, args)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.keep_freed_memory:
        fast.keep_freed_memory()
    running = Running()
    try:
        with signals_interrupt():
            trainer = run(args, ckpt_path, wants_compiled_kernels(parser, args), running)
    except UsageError as e:
        parser.error(str(e))
    except KeyboardInterrupt as e:  # a second Ctrl-C, or one before training
        signum = getattr(e, "signum", 2)
        return stopped_at_once(argv, ckpt_path, running.trainer, signum)
    except OSError as e:
        if running.trainer is None:
            raise
        return failed_save(argv, ckpt_path, running.trainer, e)
    except FloatingPointError as e:  # the loss became NaN or infinite
        return diverged(ckpt_path, running.trainer, e)
    if not trainer.dist.is_main:
        return 0
    signum = getattr(trainer, "stop_signal", None)
    if signum is not None:
        return stopped(argv, ckpt_path, trainer, signum)
    if trainer.budget_spent:
        print(
            f"time budget of {args.time_budget:g} min spent: stopped after step "
            f"{trainer.step} of {args.steps}. To go on: {resume_command(argv)}"
        )
    print(f"checkpoint: {ckpt_path} (step {trainer.step})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
