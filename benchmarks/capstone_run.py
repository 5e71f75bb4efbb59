"""The capstone's full run, outside the notebook: the worked solution of
``notebooks/10_capstone.ipynb`` (its answer cells, read from the notebook) trains on the date
task as the notebook's full-run cell does (20,000 training dates, N = 2, d_model 64, d_ff 256,
h 4, no dropout, 2,000 steps of at most 1,000 tokens), then greedy decoding reads the 1,000
held-out test dates.

    python benchmarks/capstone_run.py                 # the full run (about 2 minutes, 1 thread)
    python benchmarks/capstone_run.py --threads 2
    python benchmarks/capstone_run.py --quick         # 60 steps on 2,000 dates (figures meaningless)

Prints the machine (CPU named), the training time and the test exact match.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import torch
from torch import nn

from common import parser, setup
from transformer_lib.batching import encode_pairs, token_batches
from transformer_lib.dates import make_date_splits
from transformer_lib.tokenizers import CharTokenizer

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "10_capstone.ipynb"


def worked_solution(changes: Sequence[Tuple[str, str]] = ()) -> dict:
    """The notebook's answer cells, run as the notebook runs them: MyTransformer, my_train.
    ``changes``: (old, new) replacements in their source, e.g. a typical mistake put in."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    source = "\n\n".join(
        "".join(c["source"])
        for c in cells
        if c["metadata"].get("nbgrader", {}).get("solution")
        and not c["metadata"]["nbgrader"].get("grade")
    )
    for old, new in changes:
        if old not in source:
            raise ValueError(f"the worked solution holds no {old!r}")
        source = source.replace(old, new)
    namespace = {
        "torch": torch,
        "nn": nn,
        "math": math,
        "itertools": itertools,
        "token_batches": token_batches,
    }
    exec(compile(source, str(NOTEBOOK), "exec"), namespace)
    return namespace


def greedy(model, tok, sources: List[str], max_len: int = 12) -> List[str]:
    """The notebook's greedy decoding through the model's own encode and decode."""
    model.eval()
    rows = [tok.encode(s) for s in sources]
    width = max(len(r) for r in rows)
    src = torch.tensor([r + [tok.pad_id] * (width - len(r)) for r in rows])  # (B, S)
    src_mask = (src != tok.pad_id)[:, None, None, :]  # (B, 1, 1, S)
    with torch.no_grad():
        memory = model.encode(src)  # (B, S, D)
        ys = torch.full((len(rows), 1), tok.bos_id)  # (B, 1)
        for _ in range(max_len):
            logits = model.decode(ys, memory, src_mask)  # (B, t, V)
            ys = torch.cat((ys, logits[:, -1].argmax(-1, keepdim=True)), dim=1)
    texts = []
    for row in ys[:, 1:].tolist():
        texts.append(tok.decode(row[: row.index(tok.eos_id)] if tok.eos_id in row else row))
    return texts


def main(argv: Optional[List[str]] = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=None, help="training steps (default 2000)")
    args = p.parse_args(argv)
    if args.device != "cpu":
        raise SystemExit("--device: the capstone's run is a CPU run")
    if args.threads is None:
        args.threads = 1  # the notebook's setting
    setup(args)
    steps = args.steps or (60 if args.quick else 2000)
    n_train = 2000 if args.quick else 20000
    solution = worked_solution()
    splits = make_date_splits(n_train=n_train, n_valid=1000, n_test=1000, seed=0)
    tok = CharTokenizer.train([s for s, _ in splits["train"]] + [t for _, t in splits["train"]])
    examples = encode_pairs(splits["train"], tok)
    torch.manual_seed(args.seed)
    model = solution["MyTransformer"](
        tok.vocab_size, d_model=64, N=2, h=4, d_ff=256, dropout=0.0, max_len=64, pad_id=tok.pad_id
    )
    start = time.perf_counter()
    losses = solution["my_train"](model, examples, steps)
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    outputs = greedy(model, tok, [src for src, _ in splits["test"]])
    decoding = time.perf_counter() - start
    right = sum(out == ref for out, (_, ref) in zip(outputs, splits["test"]))
    print()
    print(
        "| steps | training dates | training s | s / step | last loss | decoding s "
        "| test exact match |"
    )
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {steps} | {len(examples):,} | {seconds:.0f} | {seconds / steps:.3f} "
        f"| {losses[-1]:.3f} | {decoding:.1f} | {right / len(outputs):.1%} "
        f"({right} of {len(outputs)}) |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
