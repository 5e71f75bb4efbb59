"""Parallel corpora in the tab-separated format of Tatoeba and Anki exports.

One sentence pair a line: ``source<TAB>target[<TAB>extra columns...]``. Extra columns
(licence, attribution, ids) are ignored, blank lines skipped, a UTF-8 byte-order mark and
Windows line ends (CRLF) accepted. A malformed line raises ``ValueError`` naming the file
and its 1-based line number, so a bad line in a million is found at once.
"""

from __future__ import annotations

import os
from typing import Iterable, List, Tuple, Union

PathLike = Union[str, "os.PathLike[str]"]


def _check_path(path) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    return os.fspath(path)


def _parse_line(raw: bytes, path: str, lineno: int):
    """One line -> (source, target), None for a blank line; ValueError if malformed."""
    where = f"{path}, line {lineno}"
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{where}: not valid UTF-8 ({err.reason} at byte {err.start})") from None
    line = line.rstrip("\r")
    if not line.strip() and "\t" not in line:
        return None
    if "\t" not in line:
        raise ValueError(f"{where}: expected 'source<TAB>target', found no tab: {line[:60]!r}")
    source, target = (field.strip() for field in line.split("\t")[:2])
    for side, text in (("source", source), ("target", target)):
        if not text:
            raise ValueError(f"{where}: the {side} side is empty: {line[:60]!r}")
    return source, target


def read_parallel(path: PathLike) -> List[Tuple[str, str]]:
    """Read ``(source, target)`` pairs from a tab-separated UTF-8 file.

    Raises ``ValueError`` naming the file and line for a line without a tab, with an
    empty side or with invalid UTF-8, and for a file that holds no pair at all.
    """
    path = _check_path(path)
    with open(path, "rb") as f:
        data = f.read()
    if data.startswith(b"\xef\xbb\xbf"):  # UTF-8 byte-order mark
        data = data[3:]
    pairs = []
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        pair = _parse_line(raw, path, lineno)
        if pair is not None:
            pairs.append(pair)
    if not pairs:
        raise ValueError(f"{path}: holds no 'source<TAB>target' line (empty file?)")
    return pairs


def write_parallel(path: PathLike, pairs: Iterable[Tuple[str, str]]) -> None:
    """Write pairs in the same format, one ``source<TAB>target`` line each (UTF-8)."""
    path = _check_path(path)
    lines = []
    for i, pair in enumerate(pairs):
        if not (
            isinstance(pair, (tuple, list))
            and len(pair) == 2
            and all(isinstance(x, str) for x in pair)
        ):
            raise TypeError(f"pairs[{i}] must be a (source, target) pair of str, got {pair!r}")
        if any(c in x for x in pair for c in "\t\n\r"):
            raise ValueError(f"pairs[{i}] holds a tab or line break, which the format forbids")
        lines.append(f"{pair[0]}\t{pair[1]}\n")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.writelines(lines)
