"""Translate sentences with a trained checkpoint: one sentence a line in, one out.

    python -m transformer_lib.translate --checkpoint checkpoints/dates.pt < dates.txt
    echo "5th of march, 2021" | python -m transformer_lib.translate --checkpoint ... --beam 4

Greedy decoding by default; ``--beam N`` uses beam search with GNMT's length penalty
(the paper's beam 4, alpha 0.6: §6.1). Input is read to the end before the first line is
written; a blank line gives a blank line.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

import torch

from ..sentences import translate
from .args import positive_int


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m transformer_lib.translate",
                                description="Translate stdin (one sentence a line) to stdout.")
    p.add_argument("--checkpoint", type=Path, required=True,
                   help="a checkpoint written by python -m transformer_lib.train")
    p.add_argument("--beam", type=positive_int, default=1, help="beam size (1 = greedy)")
    p.add_argument("--max-len", type=positive_int, help="longest output in tokens "
                   "(default: the model's max_len)")
    p.add_argument("--length-penalty", type=float, default=0.6, help="GNMT alpha (beam only)")
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   help="cpu, cuda, cuda:1, mps ... (default: cuda if available)")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    from ..training.checkpoint import load_model

    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.checkpoint.is_file():
        parser.error(f"checkpoint not found: {args.checkpoint}")
    try:
        model, src_tok, tgt_tok = load_model(args.checkpoint, device=args.device)
    except Exception as exc:  # unreadable file, wrong format, wrong keys, bad device
        parser.exit(1, f"{parser.prog}: error: cannot load checkpoint {args.checkpoint}: "
                       f"{type(exc).__name__}: {exc}\n")
    if args.max_len is not None and args.max_len > model.config.max_len:
        parser.error(f"--max-len {args.max_len} exceeds the model's max_len "
                     f"({model.config.max_len})")
    lines = [line.rstrip("\r\n") for line in sys.stdin]
    for line in translate(model, src_tok, tgt_tok, lines, args.beam, args.length_penalty,
                          args.max_len, args.batch_size):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
