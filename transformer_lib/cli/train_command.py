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
import sys
import time
from pathlib import Path
from typing import List, Optional

import torch

from .. import fast
from ..training.distributed import cleanup, init_distributed
from ..training.job import Pairs
from ..training.metrics import evaluate_translation
from ..training.trainer import Trainer, pick_device
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
from .train_checks import UsageError, check_args
from .train_setup import prepare


def build_parser() -> argparse.ArgumentParser:
    return train_parser(__doc__)


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
        score_test_pairs(trainer, test_pairs)
    cleanup(dist)
    return trainer


def score_test_pairs(trainer: Trainer, test_pairs: Pairs) -> None:
    """The trained model's exact match and BLEU on the test pairs: printed, and stored in
    the checkpoint (``extra["test"]``)."""
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
