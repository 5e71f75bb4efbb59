"""The instructor's answer key: each exercise's statement, its worked solution (the notebook's
answer cell, ``tools/kit_base.py``) and why it is right (``course/answer_notes.md``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, Sequence, Tuple

from tools.kit_base import BuildError, Exercise

NOTE = re.compile(r"^## (\d\d) Exercise (\d+) — (.+?)\s*$")


def read_notes(path: Path) -> Dict[Tuple[str, int], Tuple[str, str]]:
    """``{(NN, K): (title, note)}`` from ``## NN Exercise K — title`` headings."""
    notes: Dict[Tuple[str, int], Tuple[str, str]] = {}
    key = None
    for line in path.read_text(encoding="utf-8").splitlines():
        match = NOTE.match(line)
        if match:
            key = (match.group(1), int(match.group(2)))
            notes[key] = (match.group(3), "")
        elif line.startswith("## "):
            raise BuildError(
                f"{path.name}: heading {line!r} should read '## NN Exercise K — title'"
            )
        elif key is not None:
            notes[key] = (notes[key][0], notes[key][1] + line + "\n")
    return {k: (title, text.strip()) for k, (title, text) in notes.items()}


def notes_problems(
    all_exercises: Sequence[Exercise], notes: Dict[Tuple[str, int], Tuple[str, str]]
) -> list:
    """Exercises without a note, notes naming no exercise or another title."""
    found = {(ex.notebook[:2], ex.number): ex for ex in all_exercises}
    problems = [
        f"no note for {k[0]} Exercise {k[1]} — {ex.title}"
        for k, ex in found.items()
        if k not in notes
    ]
    for key, (title, _) in notes.items():
        if key not in found:
            problems.append(f"a note for {key[0]} Exercise {key[1]}, which does not exist")
        elif title.rstrip(".").lower() != found[key].title.rstrip(".").lower():
            problems.append(
                f"the note for {key[0]} Exercise {key[1]} is titled {title!r}; "
                f"the exercise is {found[key].title!r}"
            )
    return problems


def answer_key(all_exercises: Sequence[Exercise], notes_path: Path) -> str:
    notes = read_notes(notes_path)
    problems = notes_problems(all_exercises, notes)
    if problems:
        raise BuildError(f"{notes_path.name} must explain every exercise: " + "; ".join(problems))
    out = [
        "# Answer key",
        "",
        "Each exercise of the series: the task, the worked solution from the notebook's answer "
        "cell, and why it is right.",
        "",
    ]
    notebook = None
    for ex in all_exercises:
        if ex.notebook != notebook:
            notebook = ex.notebook
            out += [f"## {notebook}", ""]
        out += [
            f"### {notebook[:2]} · Exercise {ex.number} — {ex.title} ({ex.points:g} points)",
            "",
            "> " + ex.statement.replace("\n", "\n> "),
            "",
            "```python",
            ex.solution.strip("\n"),
            "```",
            "",
            "**Why it is right.** " + notes[(notebook[:2], ex.number)][1],
            "",
        ]
    return "\n".join(out)
