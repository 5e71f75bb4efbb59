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
from typing import List, Optional, Sequence

import torch

from ..decoding import beam_search, greedy_decode
from .args import positive_int


def translate_lines(model, src_tok, tgt_tok, lines: Sequence[str], beam: int = 1,
                    max_len: Optional[int] = None, length_penalty: float = 0.6,
                    batch_size: int = 64) -> List[str]:
    """Translate each line (in order); ``beam=1`` is greedy. Lines longer than the model's
    positional table are cut to it (``config.max_len`` tokens)."""
    c = model.config
    max_len = c.max_len if max_len is None else max_len
    device = next(model.parameters()).device
    ids = [src_tok.encode(line)[:c.max_len] for line in lines]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths, less padding
    out = [""] * len(ids)
    todo = [i for i in order if ids[i]]                          # blank lines stay blank
    for start in range(0, len(todo), batch_size):
        rows = todo[start:start + batch_size]
        S = max(len(ids[i]) for i in rows)
        src = torch.full((len(rows), S), c.pad_id, dtype=torch.long)         # (B, S)
        for r, i in enumerate(rows):
            src[r, :len(ids[i])] = torch.tensor(ids[i])
        kw = dict(bos_id=tgt_tok.bos_id, eos_id=tgt_tok.eos_id)
        hyp = (greedy_decode(model, src.to(device), max_len, **kw) if beam == 1 else
               beam_search(model, src.to(device), max_len, beam, length_penalty, **kw))
        for r, i in enumerate(rows):
            out[i] = tgt_tok.decode(hyp[r].tolist())
    return out


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
    for line in translate_lines(model, src_tok, tgt_tok, lines, args.beam, args.max_len,
                                args.length_penalty, args.batch_size):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
