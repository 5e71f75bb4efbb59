"""Translate sentences with a trained checkpoint: one sentence a line in, one out.

    python -m transformer_lib.translate --checkpoint checkpoints/dates.pt < dates.txt
    echo "5th of march, 2021" | python -m transformer_lib.translate --checkpoint ... --beam 4

Greedy decoding by default; ``--beam N`` uses beam search with GNMT's length penalty
(the paper's beam 4, alpha 0.6: §6.1). Input is read to the end before the first line is
written; a blank line gives a blank line.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import List, Optional, Sequence

from ..sentences import SourceReport, source_report, translate
from .args import device_problem, float_in, positive_int


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m transformer_lib.translate",
        description="Translate stdin (one sentence a line) to stdout.",
    )
    p.add_argument(
        "--checkpoint",
        type=Path,
        required=True,
        help="a checkpoint written by python -m transformer_lib.train",
    )
    p.add_argument("--beam", type=positive_int, default=1, help="beam size (1 = greedy)")
    p.add_argument(
        "--max-len",
        type=positive_int,
        help="longest output in tokens (default: the model's max_len)",
    )
    p.add_argument(
        "--length-penalty", type=float_in(0.0), default=0.6, help="GNMT alpha >= 0 (beam only)"
    )
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument("--device", help="cpu, cuda, cuda:1, mps ... (default: cuda if available)")
    return p


def read_lines(parser: argparse.ArgumentParser) -> List[str]:
    """stdin's lines (UTF-8), or a usage error naming the first line that is not UTF-8."""
    lines = []
    for number, raw in enumerate(sys.stdin.buffer.read().splitlines(), start=1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            parser.error(
                f"stdin, line {number}: not UTF-8 text ({e.reason} at byte "
                f"{e.start}); translate reads UTF-8"
            )
    return lines


def warn_about(report: SourceReport, max_len: int, n_lines: int) -> None:
    """One warning on stderr for what the model cannot read as given."""
    if report.cut:
        print(
            f"warning: {report.cut} of {n_lines} lines are longer than the model's "
            f"max_len ({max_len} tokens) and were cut to it",
            file=sys.stderr,
        )
    if report.unknown:
        shown = " ".join(repr(c) for c in report.characters[:10])
        more = " ..." if len(report.characters) > 10 else ""
        print(
            f"warning: {report.unknown} of {n_lines} lines hold characters outside the "
            f"vocabulary, read as <unk>: {shown}{more}",
            file=sys.stderr,
        )


def write_lines(lines: Sequence[str]) -> None:
    """Print the translations; a reader that stops early (``| head -1``) is no error."""
    try:
        for line in lines:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)  # Python's final flush must not fail
        os.dup2(devnull, sys.stdout.fileno())


def load_checked(parser: argparse.ArgumentParser, args: argparse.Namespace):
    """The checkpoint's (model, src_tok, tgt_tok) on the chosen device, or a usage error
    (exit 2; exit 1 for a file that cannot be loaded) saying what is wrong."""
    from ..training.checkpoint import load_model
    from ..training.settings import pick_device

    problem = device_problem(args.device)
    if problem is not None:
        parser.error(problem)
    if not args.checkpoint.is_file():
        parser.error(f"checkpoint not found: {args.checkpoint}")
    device = str(pick_device(args.device))
    try:
        model, src_tok, tgt_tok = load_model(args.checkpoint, device=device)
    except Exception as exc:  # unreadable file, wrong format, wrong keys
        parser.exit(
            1,
            f"{parser.prog}: error: cannot load checkpoint {args.checkpoint}: "
            f"{type(exc).__name__}: {exc}\n",
        )
    if args.max_len is not None and args.max_len > model.config.max_len:
        parser.error(
            f"--max-len {args.max_len} exceeds the model's max_len ({model.config.max_len})"
        )
    return model, src_tok, tgt_tok


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    model, src_tok, tgt_tok = load_checked(parser, args)
    lines = read_lines(parser)
    warn_about(
        source_report(src_tok, lines, model.config.max_len), model.config.max_len, len(lines)
    )
    write_lines(
        translate(
            model,
            src_tok,
            tgt_tok,
            lines,
            args.beam,
            args.length_penalty,
            args.max_len,
            args.batch_size,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
