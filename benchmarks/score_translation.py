"""Translation quality of a checkpoint on the English->French test verses: corpus BLEU
(sacrebleu, default 13a tokenizer) and chrF, for greedy decoding, beam search (K = 4,
alpha = 0.6, the paper's §6.1) and the baseline that copies the English source.

    python benchmarks/score_translation.py --checkpoint checkpoints/bible-en-fr.pt
    python benchmarks/score_translation.py --checkpoint ... --store  # keep the table in it
    python benchmarks/score_translation.py --quick                   # a smoke test: 10 verses

Prints a Markdown table, the CPU and the decoding time. ``--store`` rewrites the checkpoint
(atomically) with the scores under ``extra["scores"]``, so notebooks and the README quote
the same numbers; only an exported checkpoint (``python -m transformer_lib.export``) may be
rewritten this way.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import List, Optional

import sacrebleu
import torch

from common import cpu_model
from transformer_lib.checkpoint import (
    CheckpointError,
    load_checkpoint,
    load_model,
    save_checkpoint,
    shipped_checkpoint,
)
from transformer_lib.corpus import bible_en_fr
from transformer_lib.search import translate


def score(outputs: List[str], references: List[str]) -> dict:
    return {
        "bleu": round(sacrebleu.corpus_bleu(outputs, [references]).score, 2),
        "chrf": round(sacrebleu.corpus_chrf(outputs, [references]).score, 2),
    }


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, help="default: the shipped bible-en-fr.pt")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--length-penalty", type=float, default=0.6)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="the first 10 test verses only")
    p.add_argument("--store", action="store_true", help="keep the scores in the checkpoint")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    path = args.checkpoint or shipped_checkpoint("bible-en-fr")
    if args.store and args.quick:
        p.error("--store: not with --quick (the scores of 10 verses would replace the table)")
    if args.store and "optimizer" in load_checkpoint(path):
        p.error(
            "--store: this is a training checkpoint; export it first "
            "(python -m transformer_lib.export)"
        )
    try:
        model, tokenizer = load_model(path)
    except (FileNotFoundError, CheckpointError) as e:
        p.error(f"--checkpoint: {e}")
    test = bible_en_fr()["test"][: 10 if args.quick else None]
    sources, references = [s for s, _ in test], [t for _, t in test]
    rows, seconds = {"copy the source": score(sources, references)}, {}
    beam_name = f"beam {args.beam}, alpha {args.length_penalty}"
    for name, beam in (("greedy", 1), (beam_name, args.beam)):
        start = time.perf_counter()
        outputs = translate(model, tokenizer, sources, beam, args.length_penalty, max_len=100)
        seconds[name] = time.perf_counter() - start
        rows[name] = score(outputs, references)
    print(f"# {path.name} on {len(test)} test verses; CPU: {cpu_model()}, {args.threads} threads")
    print("| decoding | BLEU | chrF | seconds |\n|---|---|---|---|")
    for name, r in rows.items():
        took = f"{seconds[name]:.0f}" if name in seconds else "-"
        print(f"| {name} | {r['bleu']:.1f} | {r['chrf']:.1f} | {took} |")
    if args.store:
        ckpt = load_checkpoint(path)
        ckpt["extra"] = {
            **ckpt.get("extra", {}),
            "scores": {
                "test_verses": len(test),
                "greedy": rows["greedy"],
                "beam": {**rows[beam_name], "size": args.beam, "alpha": args.length_penalty},
                "copy": rows["copy the source"],
                "cpu": cpu_model(),
            },
        }
        save_checkpoint(path, ckpt)
        print(f"stored in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
