"""The paper's Table 3 at laptop scale: each row changes one thing of a small base model,
trains it with the command line (``python -m transformer_lib.train``) for a fixed number of
steps on two or more seeds, and scores it on held-out verses: dev perplexity, BLEU of greedy
and beam-4 translations, parameters.

    python benchmarks/table3.py                       # every row, seeds 0 and 1 (about 75 min, 2 cores)
    python benchmarks/table3.py --rows A E --seeds 0 1 2
    python benchmarks/table3.py --only "h=1" --seeds 0 --out h1.json   # one row
    python benchmarks/table3.py --rows A --device cuda --jobs 4        # four runs at a time
    python benchmarks/table3.py --change warmup=100 --seeds 0 1 --out mine.json  # a row of yours
    python benchmarks/table3.py --quick               # two rows, 5 steps: a smoke test

The data: the verses of ``bible-en-fr`` with at most 15 words on both sides (5,099 training
and 305 dev verses, whole chapters held out), written as TSV files for ``--train-file``.
The base: N = 2, d_model = 128, d_ff = 512, h = 8 (d_k = d_v = 16), P_drop = 0.1,
eps_ls = 0.1, pre-norm, a shared BPE vocabulary of 3,000, 1,000 steps of 1,500 tokens with
the corpus recipe's learning rate. The rows follow the paper's: (A) heads at a fixed
d_model, d_k = d_model / h; (B) a smaller d_k; (C) depth and width; (D) dropout and label
smoothing; (E) learned positions. Steps, not time, fix each run's budget, so the scores do
not depend on the machine's load; the time each run took is recorded beside them.

Writes one JSON file (machine, commit, seeds, every run) and prints the table: the mean over
the seeds and, in brackets, the lowest and highest.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import torch

from common import check_device, cpu_model, git_commit, results_file

ROOT = Path(__file__).resolve().parents[1]
MAX_WORDS, N_VALID = 15, 300
BASE = {
    "--layers": "2",
    "--d-model": "128",
    "--d-ff": "512",
    "--heads": "8",
    "--dropout": "0.1",
    "--label-smoothing": "0.1",
    "--positions": "sinusoidal",
    "--max-len": "128",
    "--vocab-size": "3000",
    "--max-tokens": "1500",
    "--warmup": "300",
    "--lr-factor": "0.8",
    "--cooldown": "0.3",
    "--eval-limit": "1",
}
# (row, name, the flags it changes): each row changes one thing of the base, as in the paper
ROWS = [
    ("base", "base", {}),
    ("A", "h=1", {"--heads": "1"}),
    ("A", "h=2", {"--heads": "2"}),
    ("A", "h=4", {"--heads": "4"}),
    ("A", "h=16", {"--heads": "16"}),
    ("B", "d_k=8", {"--d-k": "8"}),
    ("B", "d_k=4", {"--d-k": "4"}),
    ("C", "N=1", {"--layers": "1"}),
    ("C", "N=4", {"--layers": "4"}),
    ("C", "d_model=64", {"--d-model": "64"}),
    ("C", "d_model=256", {"--d-model": "256"}),
    ("C", "d_ff=256", {"--d-ff": "256"}),
    ("C", "d_ff=1024", {"--d-ff": "1024"}),
    ("D", "P_drop=0.0", {"--dropout": "0.0"}),
    ("D", "P_drop=0.2", {"--dropout": "0.2"}),
    ("D", "eps_ls=0.0", {"--label-smoothing": "0.0"}),
    ("D", "eps_ls=0.2", {"--label-smoothing": "0.2"}),
    ("E", "learned", {"--positions": "learned"}),
]


def write_data(folder: Path) -> Dict[str, List[tuple]]:
    """The short verses of the corpus as train.tsv and valid.tsv in ``folder``."""
    from transformer_lib.corpus import bible_en_fr

    splits = bible_en_fr(max_words=MAX_WORDS, n_valid=N_VALID, n_test=0)
    for name in ("train", "valid"):
        lines = "".join(f"{en}\t{fr}\n" for en, fr in splits[name])
        (folder / f"{name}.tsv").write_text(lines, encoding="utf-8")
    return splits


def evaluate(checkpoint: Path, pairs: list, device: str, beam: bool) -> dict:
    """Dev perplexity (exp of the mean cross-entropy per target token, </s> included, as the
    paper's per-wordpiece figure) and corpus BLEU of greedy and beam-4 translations."""
    from transformer_lib.batching import encode_pairs, token_batches
    from transformer_lib.checkpoint import load_model
    from transformer_lib.search import translate
    from transformer_lib.training import bleu

    model, tok = load_model(checkpoint, device)
    total, tokens = 0.0, 0
    with torch.no_grad():
        for b in token_batches(encode_pairs(pairs, tok), 3000, shuffle=False):
            b = b.to(device)
            logits = model(b.src, b.tgt_in).flatten(0, 1).float()
            loss = torch.nn.functional.cross_entropy(
                logits, b.tgt_out.flatten(), ignore_index=tok.pad_id, reduction="sum"
            )
            total, tokens = total + loss.item(), tokens + b.n_tokens
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    scores = {
        "ppl": math.exp(total / tokens),
        "bleu_greedy": bleu(translate(model, tok, sources, batch_size=128), refs),
        "params": sum(p.numel() for p in model.parameters()),
    }
    if beam:
        scores["bleu_beam"] = bleu(translate(model, tok, sources, beam=4, batch_size=64), refs)
    return scores


def train_command(
    flags: Dict[str, Optional[str]],
    seed: int,
    steps: int,
    data: Path,
    out: Path,
    args: argparse.Namespace,
) -> List[str]:
    options = {**BASE, **flags, "--seed": str(seed), "--steps": str(steps)}
    return [
        sys.executable, "-m", "transformer_lib.train",
        "--train-file", str(data / "train.tsv"), "--valid-file", str(data / "valid.tsv"),
        "--norm-first", *[x for kv in options.items() for x in kv if x is not None], "--no-progress",
        "--out", str(out), "--force", "--device", args.device, "--threads", str(args.threads),
    ]  # fmt: skip


def run_one(job: tuple, args: argparse.Namespace, data: Path, pairs: list) -> dict:
    row, name, flags, seed = job
    out = data / re.sub(r"[^\w.=-]", "_", f"{row}-{name}-{seed}")
    command = train_command(flags, seed, args.steps, data, out, args)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{row} {name} seed {seed} failed:\n{done.stderr.strip()[-2000:]}")
    start = time.perf_counter()
    scores = evaluate(out / "checkpoint.pt", pairs, args.device, not args.no_beam)
    beam = "" if args.no_beam else f" / {scores['bleu_beam']:.1f}"
    print(
        f"{row:4} {name:12} seed {seed}: ppl {scores['ppl']:.2f}  BLEU {scores['bleu_greedy']:.1f}"
        f"{beam}  ({seconds:.0f} s training)",
        flush=True,
    )
    return {"row": row, "name": name, "flags": flags, "seed": seed, "train_seconds": seconds,
            "eval_seconds": time.perf_counter() - start, **scores}  # fmt: skip


def summary(runs: Sequence[dict], rows: Sequence[tuple] = ROWS) -> str:
    """The Markdown table of ``runs``: one line a row, mean (lowest-highest) over seeds."""

    def cell(values: List[float], digits: int) -> str:
        if len(values) == 1:
            return f"{values[0]:.{digits}f}"
        mean = statistics.mean(values)
        return f"{mean:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"

    lines = [
        "| row | change | params | dev ppl | BLEU greedy | BLEU beam 4 | s / run |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for row, name, _ in rows:
        mine = [r for r in runs if (r["row"], r["name"]) == (row, name)]
        if mine:
            beam = [r["bleu_beam"] for r in mine if "bleu_beam" in r]
            lines.append(
                f"| {row} | {name} | {mine[0]['params']:,} | {cell([r['ppl'] for r in mine], 2)}"
                f" | {cell([r['bleu_greedy'] for r in mine], 1)}"
                f" | {cell(beam, 1) if beam else '-'}"
                f" | {statistics.mean(r['train_seconds'] for r in mine):.0f} |"
            )
    return "\n".join(lines)


def parse(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--rows",
        nargs="+",
        default=["base", "A", "B", "C", "D", "E"],
        choices=["base", "A", "B", "C", "D", "E"],
        help="rows to run (default: all)",
    )
    p.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="NAME",
        help=f"run these names only: {', '.join(n for _, n, _ in ROWS)}",
    )
    p.add_argument(
        "--change",
        nargs="+",
        default=None,
        metavar="FLAG=VALUE",
        help="run one row of your own instead: the base with these options of "
        "python -m transformer_lib.train changed, e.g. warmup=100 d-ff=1024 no-norm-first",
    )
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    p.add_argument("--steps", type=int, default=1000, help="training steps of every run")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    p.add_argument("--threads", type=int, default=2, help="threads of each training process")
    p.add_argument("--jobs", type=int, default=1, help="runs at a time (on a GPU)")
    p.add_argument("--no-beam", action="store_true", help="greedy BLEU only")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the JSON file (default: benchmarks/table3.json; with --quick, a temporary one)",
    )
    p.add_argument("--quick", action="store_true", help="base and E, 5 steps, seed 0")
    args = p.parse_args(argv)  # fmt: skip
    results_file(p, args, "table3.json", ("steps", "threads", "jobs"))
    names = {n for _, n, _ in ROWS}
    unknown = sorted(set(args.only or []) - names)
    if unknown:
        p.error(f"--only: unknown name(s) {', '.join(unknown)}; choose from {sorted(names)}")
    check_device(args.device)
    args.own = None
    if args.change:
        bad = [c for c in args.change if not re.fullmatch(r"[a-z][a-z0-9-]*(=\S+)?", c)]
        if bad:
            p.error(f"--change: expected FLAG=VALUE or FLAG, with a flag of the training command "
                    f"(e.g. warmup=100 or no-norm-first), got {' '.join(bad)}")  # fmt: skip
        flags = {"--" + c.split("=", 1)[0]: (c.split("=", 1) + [None])[1] for c in args.change}
        args.own = ("own", ",".join(args.change), flags)
    if args.quick:
        args.rows, args.only, args.seeds, args.steps = ["base", "E"], None, [0], 5
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse(argv)
    rows = [args.own] if args.own else ROWS
    if not args.own:
        rows = [(r, n, f) for r, n, f in rows if r in args.rows and n in (args.only or [n])]
    jobs = [(r, n, f, s) for r, n, f in rows for s in args.seeds]
    commit = git_commit(ROOT)  # the code the runs start from
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder)
        pairs = write_data(data)["valid"][: 20 if args.quick else None]
        with ThreadPoolExecutor(args.jobs) as pool:
            runs = list(pool.map(lambda job: run_one(job, args, data, pairs), jobs))
    machine = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else cpu_model()
    record = {
        "machine": f"{machine} ({torch.backends.cpu.get_cpu_capability()})",
        "torch": torch.__version__,
        "commit": commit,
        "command": "python benchmarks/table3.py " + " ".join(argv or sys.argv[1:]),
        "steps": args.steps,
        "seeds": args.seeds,
        "threads": args.threads,
        "base": {**BASE, "--norm-first": True, "max_words": MAX_WORDS},
        "dev_verses": len(pairs),
        "seconds": time.perf_counter() - start,
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"\n{record['machine']}, {args.steps} steps, seeds {args.seeds}, "
          f"{record['seconds'] / 60:.0f} min: {args.out}\n")  # fmt: skip
    print(summary(runs, ROWS + ([args.own] if args.own else [])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
