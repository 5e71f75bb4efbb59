"""Translation quality of a checkpoint on the English->French test verses: corpus BLEU
(sacrebleu, default 13a tokenizer) and chrF, for greedy decoding, beam search (K = 4,
alpha = 0.6, the paper's §6.1) and the baseline that copies the English source.

    python benchmarks/score_translation.py --checkpoint checkpoints/bible-en-fr.pt
    python benchmarks/score_translation.py --checkpoint ... --store    # also keep the table
                                                                       # in the checkpoint
    python benchmarks/score_translation.py --quick                     # a smoke test: 20 verses

Prints a Markdown table, the CPU and the decoding time. ``--store`` rewrites the checkpoint
(atomically) with the scores under ``extra["scores"]``, so notebooks and the README quote
the same numbers; only an inference checkpoint (``python -m transformer_lib.export``) may be
rewritten this way.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import sacrebleu
import torch

from transformer_lib.data.bible import bible_en_fr
from transformer_lib.sentences import translate
from transformer_lib.training.checkpoint import (
    load_checkpoint,
    load_model,
    save_checkpoint,
    shipped_checkpoint,
)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def score(outputs, references):
    return {
        "bleu": round(sacrebleu.corpus_bleu(outputs, [references]).score, 2),
        "chrf": round(sacrebleu.corpus_chrf(outputs, [references]).score, 2),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, help="default: the shipped bible-en-fr.pt")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--length-penalty", type=float, default=0.6)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="the first 20 test verses only")
    p.add_argument("--store", action="store_true", help="keep the scores in the checkpoint")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    path = args.checkpoint or shipped_checkpoint("bible-en-fr")
    model, src_tok, tgt_tok = load_model(path)
    test = bible_en_fr()["test"][: 20 if args.quick else None]
    sources, references = [s for s, _ in test], [t for _, t in test]
    rows, seconds = {"copy the source": score(sources, references)}, {}
    for name, beam in (
        ("greedy", 1),
        (f"beam {args.beam}, alpha {args.length_penalty}", args.beam),
    ):
        start = time.perf_counter()
        outputs = translate(
            model,
            src_tok,
            tgt_tok,
            sources,
            beam=beam,
            length_penalty=args.length_penalty,
            max_len=100,
        )
        seconds[name] = time.perf_counter() - start
        rows[name] = score(outputs, references)
    print(f"# {path.name} on {len(test)} test verses; CPU: {cpu_name()}, {args.threads} threads")
    print("| decoding | BLEU | chrF | seconds |\n|---|---|---|---|")
    for name, r in rows.items():
        took = f"{seconds[name]:.0f}" if name in seconds else "-"
        print(f"| {name} | {r['bleu']:.1f} | {r['chrf']:.1f} | {took} |")
    if args.store and not args.quick:
        ckpt = load_checkpoint(path)
        if "optimizer" in ckpt:
            p.error(
                "--store: this is a training checkpoint; export it first "
                "(python -m transformer_lib.export)"
            )
        ckpt["extra"] = {
            **ckpt.get("extra", {}),
            "scores": {
                "test_verses": len(test),
                "greedy": rows["greedy"],
                "beam": {
                    **rows[f"beam {args.beam}, alpha {args.length_penalty}"],
                    "size": args.beam,
                    "alpha": args.length_penalty,
                },
                "copy": rows["copy the source"],
                "cpu": cpu_name(),
            },
        }
        save_checkpoint(path, ckpt)
        print(f"stored in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
