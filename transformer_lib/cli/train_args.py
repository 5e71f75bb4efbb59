"""The options of the training command line (:mod:`transformer_lib.cli.train_command`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Protocol

from ..training.job import PRESETS, SEED_MAX
from .args import float_in, folder, int_in, non_negative_int, positive_float, positive_int
from .recipes import TrainParser, recipe_epilog

MAX_LEN = 65536  # positions: the table alone is max_len x d_model floats


def train_parser(description: str) -> argparse.ArgumentParser:
    """The options of ``python -m transformer_lib.train``, in three groups."""
    p = TrainParser(
        prog="python -m transformer_lib.train",
        description=description,
        epilog=recipe_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_data_flags(p.add_argument_group("data"))
    add_model_flags(p.add_argument_group("model (ignored with --resume: the checkpoint's is used)"))
    train = p.add_argument_group("training")
    add_schedule_flags(train)
    add_run_flags(train)
    add_speed_flags(train)
    train.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: cuda if available)")
    train.add_argument("--seed", type=int_in(0, SEED_MAX), default=0)
    train.add_argument("--threads", type=positive_int, help="torch.set_num_threads")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


class Group(Protocol):
    """An argument group of the parser (what ``add_argument_group`` returns)."""

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action: ...


def add_data_flags(data: Group) -> None:
    """What to train on: a built-in task or corpus, or files of one's own."""
    data.add_argument("--task", choices=["dates"], help="a built-in task")
    data.add_argument(
        "--corpus",
        choices=["bible-en-fr"],
        help="a built-in corpus of real sentences: English->French Bible verses "
        "(train/valid/test split by chapter; see transformer_lib.data.bible), "
        "with its own defaults (listed at the end)",
    )
    data.add_argument("--train-file", type=Path, help="TSV corpus: source<TAB>target lines")
    data.add_argument("--valid-file", type=Path, help="TSV corpus for validation")
    data.add_argument("--test-file", type=Path, help="TSV corpus scored once at the end")
    data.add_argument(
        "--vocab-size",
        type=positive_int,
        default=8000,
        help="BPE vocabulary shared by source and target (corpus only)",
    )
    data.add_argument(
        "--n-train", type=positive_int, default=20000, help="training pairs of the date task"
    )
    data.add_argument(
        "--n-valid", type=positive_int, default=1000, help="validation pairs of the date task"
    )
    data.add_argument(
        "--n-test", type=positive_int, default=1000, help="test pairs of the date task"
    )


def add_model_flags(model: Group) -> None:
    """The model's sizes (Table 3's names), on top of ``--preset``."""
    model.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    model.add_argument("--d-model", type=positive_int)
    model.add_argument("--layers", type=positive_int, help="N, in encoder and decoder")
    model.add_argument("--heads", type=positive_int, help="h")
    model.add_argument("--d-ff", type=positive_int)
    model.add_argument("--dropout", type=float_in(0.0, 1.0, max_open=True), help="P_drop")
    model.add_argument(
        "--norm-first",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="pre-norm layers, x + Sublayer(LayerNorm(x)), with a final LayerNorm; "
        "--no-norm-first: post-norm, LayerNorm(x + Sublayer(x)), as in the paper (the "
        "default, except in a corpus recipe that says otherwise)",
    )
    model.add_argument(
        "--max-len", type=int_in(2, MAX_LEN), help=f"longest sequence (positions), 2 to {MAX_LEN}"
    )


def add_schedule_flags(train: Group) -> None:
    """Steps, batches and the learning rate (§5); then validation and averaging."""
    train.add_argument("--steps", type=positive_int, default=2000, help="total steps")
    train.add_argument(
        "--max-tokens", type=positive_int, default=2000, help="tokens per batch (per process)"
    )
    train.add_argument("--warmup", type=positive_int, default=400)
    train.add_argument("--lr-factor", type=positive_float, default=1.0)
    train.add_argument("--label-smoothing", type=float_in(0.0, 1.0, max_open=True), default=0.1)
    train.add_argument(
        "--cooldown",
        type=float_in(0.0, 1.0),
        default=0.0,
        metavar="FRACTION",
        help="over this last fraction of the run (of --steps, or of --time-budget if that "
        "ends first) the learning rate falls linearly to zero (0: off); a resumed run with "
        "a budget rises to the schedule's rate and falls again over its own budget",
    )
    add_checking_flags(train)


def add_checking_flags(train: Group) -> None:
    """Validation, checkpoints, checkpoint averaging (§6.1) and the time budget."""
    train.add_argument(
        "--eval-every",
        type=non_negative_int,
        default=0,
        help="validate every N steps (0: at the end only)",
    )
    train.add_argument(
        "--eval-limit",
        type=positive_int,
        default=500,
        help="validation pairs decoded for exact match and BLEU",
    )
    train.add_argument(
        "--save-every",
        type=non_negative_int,
        default=0,
        help="checkpoint every N steps (0: at the end only)",
    )
    train.add_argument(
        "--average-last",
        type=non_negative_int,
        default=0,
        help="final model = mean of the last K snapshots (paper: 5, §6.1)",
    )
    train.add_argument(
        "--average-every", type=positive_int, default=100, help="steps between those snapshots"
    )
    train.add_argument(
        "--time-budget",
        type=positive_float,
        metavar="MINUTES",
        help="stop cleanly after this many minutes of training (validation "
        "included), with a checkpoint and the test set scored, as a lab "
        "session needs; --resume continues it",
    )


def add_run_flags(train: Group) -> None:
    """Where the checkpoint goes, and resuming an earlier run."""
    train.add_argument("--out", type=folder, required=True, help="output folder")
    train.add_argument("--name", default="checkpoint.pt", help="checkpoint file in --out")
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue --out/--name with the same flags (--steps, --eval-every, "
        "--eval-limit, --save-every, --average-last and --average-every "
        "may change)",
    )
    train.add_argument(
        "--override",
        action="store_true",
        help="with --resume: accept other training or data flags than the "
        "checkpoint's (the run then differs from an uninterrupted one)",
    )
    train.add_argument("--force", action="store_true", help="overwrite an existing checkpoint")


def add_speed_flags(train: Group) -> None:
    """bf16, the compiled CPU kernels, torch.compile and the allocator."""
    train.add_argument("--bf16", action="store_true", help="bfloat16 autocast")
    train.add_argument(
        "--compiled-kernels",
        action=argparse.BooleanOptionalAction,
        help="CPU dropout masks, the feed-forward layer and attention through "
        "compiled kernels: the same masks, faster steps (built on first "
        "use, ~30 s, then cached; see transformer_lib.fast). "
        "Default: on when training on a CPU and a C++ compiler can build "
        "them, else off; --compiled-kernels: on, or stop if they cannot be "
        "built",
    )
    train.add_argument(
        "--compile",
        nargs="?",
        const="inductor",
        metavar="BACKEND",
        choices=("inductor", "aot_eager", "eager"),
        help="compile the training step with torch.compile (dynamic shapes; "
        "default backend inductor, on a CPU with transformer_lib.fast."
        "compile_model's settings, and a C++ compiler needed there); the "
        "first steps compile (about 80 s for a 3+3-layer d_model 256 "
        "model on 2 CPU cores); turns the compiled CPU "
        "kernels off, which are faster on a CPU. Default: off",
    )
    train.add_argument(
        "--keep-freed-memory",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Linux with glibc: malloc keeps what a step frees for the next step "
        "instead of handing it back to the OS (fewer page faults; default). "
        "Results are the same either way",
    )
