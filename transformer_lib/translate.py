"""Translate sentences with a trained checkpoint: ``python -m transformer_lib.translate``.

    echo "5th of march, 2021" | python -m transformer_lib.translate --checkpoint checkpoints/dates.pt
    python -m transformer_lib.translate --checkpoint checkpoints/bible-en-fr.pt --beam 4 < in.txt

One sentence a line in, one translation a line out; a blank line gives a blank line. Greedy
decoding by default; ``--beam N`` uses beam search with GNMT's length penalty (the paper's
beam 4, alpha 0.6: §6.1). A warning on stderr says once which lines were cut to the model's
``max_len`` or hold characters outside its vocabulary.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import List, Optional

from .train import exit_on_signal


def main(argv: Optional[List[str]] = None) -> int:
    exit_on_signal("stopped; translations not yet written are lost")
    from .checkpoint import CheckpointError, load_model
    from .search import translate
    from .train import check_device

    p = argparse.ArgumentParser(prog="python -m transformer_lib.translate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", type=Path, required=True, help="a checkpoint of the series")
    p.add_argument("--beam", type=int, default=1, help="beam size (1: greedy decoding)")
    p.add_argument("--length-penalty", type=float, default=0.6, help="GNMT alpha >= 0 (beam)")
    p.add_argument("--max-len", type=int, help="longest output in tokens (default: the model's)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--device", help="cpu, cuda, cuda:1, mps (default: cuda if available)")
    args = p.parse_args(argv)
    for name in ("beam", "batch_size", "max_len"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.length_penalty < 0:
        p.error(f"--length-penalty must be at least 0, got {args.length_penalty}")
    device = check_device(p, args.device)
    if not args.checkpoint.is_file():
        p.error(f"--checkpoint: no such file: {args.checkpoint}")
    try:
        model, tokenizer = load_model(args.checkpoint, device)
    except CheckpointError as e:
        p.error(f"--checkpoint: {e}")
    max_len = model.config.max_len
    if args.max_len is not None and args.max_len > max_len:
        p.error(f"--max-len {args.max_len} exceeds the model's max_len ({max_len})")
    lines = []
    for number, raw in enumerate(sys.stdin.buffer.read().splitlines(), start=1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            p.error(f"stdin, line {number}: not UTF-8 text ({e.reason} at byte {e.start})")
    encoded = [tokenizer.encode(line) for line in lines]
    cut = sum(len(ids) > max_len for ids in encoded)
    unknown = sorted({c for line in lines for c in line if tokenizer.unk_id in tokenizer.encode(c)})
    if cut:
        print(f"warning: {cut} of {len(lines)} lines are longer than the model's max_len "
              f"({max_len} tokens) and were cut to it", file=sys.stderr)
    if unknown:
        print(f"warning: characters outside the vocabulary, read as <unk>: "
              f"{' '.join(map(repr, unknown[:10]))}{' ...' if len(unknown) > 10 else ''}",
              file=sys.stderr)
    out = translate(model, tokenizer, lines, args.beam, args.length_penalty, args.max_len,
                    args.batch_size)
    try:
        sys.stdout.write("".join(line + "\n" for line in out))
        sys.stdout.flush()
    except BrokenPipeError:                       # a reader that stops early (| head -1)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
