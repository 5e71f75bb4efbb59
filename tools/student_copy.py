"""Blank, in the student copies, what an exercise below asks for.

A notebook often builds a piece by hand, or prints the library's source, before its exercises
ask the learner to write that very piece. In the full notebook that is the lesson; in a
student copy it is the answer above the question. Such a cell carries the cell tag
``student-hide`` and, in its metadata, which exercise it answers::

    "tags": ["student-hide"],
    "student_hide": {"exercise": 3}                       # Exercise 3 of this notebook
    "student_hide": {"exercise": 5, "notebook": "06"}     # Exercise 5 of notebook 06
    "student_hide": {"exercise": 2, "code": "MyPositionalEncoding = PositionalEncoding\\n..."}

The student copy of a tagged code cell keeps a comment naming the exercise and then

- ``code``, when given: code that still defines what later cells use, without showing how
  (e.g. the library's class standing in for the hidden one);
- otherwise the cell's own lines less those printing ``inspect.getsource(...)``: a cell that
  only printed the library's source becomes the comment alone.

Its outputs are cleared (they held the source or the hidden code's results). A tagged
markdown cell becomes the note in italics. ``tools/course_student.py`` calls :func:`hide_shown`
before it removes the solutions.
"""

from __future__ import annotations

import copy
import re
from typing import Optional, Type

TAG = "student-hide"
KEY = "student_hide"
GETSOURCE = re.compile(r"^\s*print\(\s*inspect\.getsource\(.*\)\s*\)\s*$")
NOTE = "Hidden in your copy: this cell showed the answer to {where}."


def source(cell: dict) -> str:
    text = cell.get("source", "")
    return text if isinstance(text, str) else "".join(text)


def is_hidden(cell: dict) -> bool:
    """Whether the cell is blanked in the student copies."""
    return TAG in cell.get("metadata", {}).get("tags", [])


def spec(cell: dict, where: str) -> dict:
    """The cell's ``student_hide`` metadata, checked; ``where`` names the cell in errors."""
    meta = cell.get("metadata", {}).get(KEY)
    if not isinstance(meta, dict):
        raise ValueError(
            f"{where}: a cell tagged {TAG!r} needs metadata {KEY!r}, a dict "
            f"with 'exercise' (an int), got {meta!r}"
        )
    unknown = sorted(set(meta) - {"exercise", "notebook", "code"})
    exercise = meta.get("exercise")
    if unknown or isinstance(exercise, bool) or not isinstance(exercise, int) or exercise < 1:
        raise ValueError(
            f"{where}: {KEY} should be {{'exercise': N >= 1, optionally "
            f"'notebook': 'NN', 'code': str}}, got {meta!r}"
        )
    for key in ("notebook", "code"):
        if key in meta and not (isinstance(meta[key], str) and meta[key].strip()):
            raise ValueError(
                f"{where}: {KEY}[{key!r}] should be a non-empty str, got {meta[key]!r}"
            )
    return meta


def note(meta: dict) -> str:
    """The sentence that replaces the hidden cell, naming its exercise."""
    where = f"Exercise {meta['exercise']}"
    where += f" of notebook {meta['notebook']}" if "notebook" in meta else " below"
    return NOTE.format(where=where)


def without_source_prints(code: str) -> str:
    """The cell's lines less those printing ``inspect.getsource(...)``."""
    kept = [line for line in code.split("\n") if not GETSOURCE.match(line)]
    return "\n".join(kept).strip("\n")


def student_cell(cell: dict, where: str) -> dict:
    """The student copy of one tagged cell (a new dict; ``cell`` is not changed)."""
    meta = spec(cell, where)
    cell = copy.deepcopy(cell)
    if cell["cell_type"] == "markdown":
        cell["source"] = f"*{note(meta)}*"
        return cell
    if cell["cell_type"] != "code":
        raise ValueError(
            f"{where}: only code and markdown cells can be tagged {TAG!r}, "
            f"not a {cell['cell_type']} cell"
        )
    code = meta["code"] if "code" in meta else without_source_prints(source(cell))
    if "code" not in meta and code == source(cell).strip("\n"):
        raise ValueError(
            f"{where}: tagged {TAG!r} but it prints no inspect.getsource(...) "
            f"and {KEY} gives no 'code' to show instead: nothing would be hidden"
        )
    lines = ["# " + note(meta)] + ([code.strip("\n")] if code.strip() else [])
    cell["source"] = "\n".join(lines)
    cell["outputs"], cell["execution_count"] = [], None
    cell["metadata"].pop("execution", None)
    return cell


def hide_shown(nb: dict, name: str, error: Type[Exception] = ValueError) -> dict:
    """A copy of ``nb`` with every ``student-hide`` cell blanked (raises ``error``, naming the
    notebook and cell, when a tagged cell's metadata is wrong)."""
    nb = copy.deepcopy(nb)
    try:
        nb["cells"] = [
            student_cell(cell, f"{name}, cell {i}") if is_hidden(cell) else cell
            for i, cell in enumerate(nb["cells"])
        ]
    except ValueError as err:
        raise error(str(err)) from None
    return nb


def hidden_cells(nb: dict, exercise: Optional[int] = None) -> list:
    """Indices of the tagged cells (of one exercise of this notebook, when given)."""
    return [
        i
        for i, cell in enumerate(nb["cells"])
        if is_hidden(cell)
        and (
            exercise is None
            or (
                cell["metadata"].get(KEY, {}).get("exercise") == exercise
                and "notebook" not in cell["metadata"].get(KEY, {})
            )
        )
    ]
