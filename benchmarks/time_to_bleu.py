"""Time to a translating model: test BLEU after fixed wall-clock budgets of training.

For each budget, the training command line trains the English->French recipe from scratch,
in its own process, and stops cleanly when the budget is spent (``--time-budget MINUTES``,
``TrainConfig.time_budget``: training and validation count, loading the corpus and
training the tokenizer do not). The checkpoint it writes is then scored on the held-out
test verses: corpus BLEU (sacrebleu, ``13a``) with greedy decoding and with beam search
(K = 4, alpha = 0.6, §6.1), as ``score_translation.py`` scores the shipped model.

By default the recipe is the command line's own for ``--corpus bible-en-fr``
(``transformer_lib.train.RECIPES["corpus"]``): the shape, batch and schedule tuned for
the best test BLEU after 10 minutes on a 2-core CPU. ``--recipe shipped`` trains the untuned
recipe of ``checkpoints/bible-en-fr.pt`` (``checkpoints/README.md``) instead, less its fixed
step count and checkpoint averaging, which need the run's length in steps (a budgeted run
has none): BPE 6,000, N = 3, d_model 256, h 4, d_ff 1024, P_drop 0.2, post-norm, no
cool-down, batches of 4,000 tokens, warm-up 800, lr factor 0.5. ``--train-args`` adds flags
(or overrides the recipe's: the last one given wins).

    python benchmarks/time_to_bleu.py                        # 3, 10 and 30 minutes (~50 min)
    python benchmarks/time_to_bleu.py --budgets 10 --threads 2
    python benchmarks/time_to_bleu.py --recipe shipped       # the untuned recipe
    python benchmarks/time_to_bleu.py --train-args="--bf16"  # on a CPU with native bf16
    python benchmarks/time_to_bleu.py --quick                # smoke test (~20 s on 2 cores)

Prints the machine (CPU named), then one row per budget: the steps trained, the training
seconds the command line reports, and greedy and beam BLEU on the test verses.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import torch

import common
from transformer_lib.checkpoint import load_checkpoint, load_model
from transformer_lib.corpus import bible_en_fr
from transformer_lib.search import translate
from transformer_lib.training import bleu

SHIPPED = (  # the flags of checkpoints/bible-en-fr.pt (checkpoints/README.md), budgeted
    "--vocab-size 6000 --d-model 256 --layers 3 --heads 4 --d-ff 1024 --dropout 0.2 "
    "--no-norm-first --cooldown 0 --max-len 128 --max-tokens 4000 --warmup 800 "
    "--lr-factor 0.5 --eval-every 0 --eval-limit 100"
).split()
QUICK_RECIPE = (  # a tiny stand-in: the pipeline end to end in seconds
    "--vocab-size 1000 --d-model 32 --layers 1 --heads 2 --d-ff 64 --dropout 0.1 "
    "--max-len 24 --max-tokens 1000 --warmup 50 --eval-every 0 --eval-limit 4 "
    "--no-compiled-kernels"
).split()
STEPS = "1000000"  # more than any budget reaches: the budget stops the run
TRAINED = re.compile(r"trained steps (\d+)-(\d+) in ([\d.]+) s")


def train_command(budget: float, out: Path, args) -> List[str]:
    """The command line that trains one budget's model into ``out``."""
    recipe = QUICK_RECIPE if args.quick else (SHIPPED if args.recipe == "shipped" else [])
    cmd = [
        sys.executable,
        "-m",
        "transformer_lib.train",
        "--corpus",
        "bible-en-fr",
        *recipe,
        "--steps",
        STEPS,
        "--time-budget",
        f"{budget:g}",
        "--seed",
        str(args.seed),
        "--no-progress",
        "--out",
        str(out),
        "--name",
        "checkpoint.pt",
        "--force",
    ]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    return cmd + shlex.split(args.train_args)


def train(budget: float, out: Path, args) -> Dict[str, float]:
    """Train one budget's model; -> steps and training seconds (as the command line says)."""
    cmd = train_command(budget, out, args)
    print(f"# {budget:g} min: {shlex.join(cmd[1:])}", flush=True)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(
            f"the training command failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
        )
    found = TRAINED.search(done.stdout)
    ckpt = load_checkpoint(out / "checkpoint.pt")
    return {
        "steps": int(ckpt["step"]),
        "train_s": float(found.group(3)) if found else float("nan"),
        "process_s": time.perf_counter() - start,
    }


def score_bleu(model, tokenizer, test, beam: int) -> float:
    """Corpus BLEU (13a) of the model's translations of the ``test`` pairs."""
    sources, references = [s for s, _ in test], [t for _, t in test]
    max_len = min(100, model.config.max_len)
    return bleu(translate(model, tokenizer, sources, beam, 0.6, max_len), references)


def row(budget: float, out: Path, test, args) -> List[str]:
    """One budget: train, then score the checkpoint greedy and with beam search."""
    trained = train(budget, out, args)
    model, tokenizer = load_model(out / "checkpoint.pt")
    start = time.perf_counter()
    greedy, beam = (score_bleu(model, tokenizer, test, k) for k in (1, args.beam))
    return [
        f"{budget:g}",
        f"{trained['steps']:,}",
        f"{trained['train_s']:.0f}",
        f"{trained['process_s']:.0f}",
        f"{greedy:.1f}",
        f"{beam:.1f}",
        f"{time.perf_counter() - start:.0f}",
    ]


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--budgets",
        nargs="+",
        type=float,
        default=None,
        metavar="MINUTES",
        help="training budgets in minutes (default 3 10 30; --quick: 0.05)",
    )
    p.add_argument(
        "--recipe",
        choices=["defaults", "shipped"],
        default="defaults",
        help="defaults: the command line's own (tuned) recipe for --corpus "
        "bible-en-fr (default); shipped: the untuned flags of "
        "checkpoints/bible-en-fr.pt, less its step count and averaging",
    )
    p.add_argument("--train-args", default="", help="more flags for the training command")
    p.add_argument(
        "--test-verses",
        type=int,
        default=None,
        help="score the first N test verses (default all 1,008; --quick: 8)",
    )
    p.add_argument("--beam", type=int, default=4)
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads of training and scoring (default: PyTorch's choice)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="keep each budget's run in OUT/<minutes>min (default: a temporary "
        "folder, removed at the end)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: a tiny model, 3 s of training, 8 test verses",
    )
    args = p.parse_args(argv)
    budgets = args.budgets or ([0.05] if args.quick else [3.0, 10.0, 30.0])
    if args.threads:
        torch.set_num_threads(args.threads)
    print(common.machine_line(torch.device("cpu")), flush=True)
    test = bible_en_fr()["test"][: args.test_verses or (8 if args.quick else None)]
    with tempfile.TemporaryDirectory() as tmp:
        root = args.out or Path(tmp)
        rows = [row(b, root / f"{b:g}min", test, args) for b in budgets]
    print(
        common.table(
            [
                "minutes",
                "steps",
                "train s",
                "process s",
                "BLEU greedy",
                f"BLEU beam {args.beam}",
                "scoring s",
            ],
            rows,
            f"Test BLEU after a training budget, English->French, recipe "
            f"{'quick' if args.quick else args.recipe}, {len(test)} test verses; "
            f"CPU: {common.cpu_model()}",
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
