"""The lesson's notebooks as a learner meets them: an opening that says what and how long,
prose that speaks to learners only, at most 460 cells for 01-09, and exercises that are real
ones (nbgrader's cells, graded, and never answered in a cell above them)."""

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
STYLE_PT = 13  # transformer_lib.plotting.STYLE's text (tests/test_figures.py holds it there)
LESSON = sorted(NOTEBOOKS.glob("0[1-9]_*.ipynb"))
BEYOND = sorted(NOTEBOOKS.glob("1[2-9]_*.ipynb"))  # after the capstone and the appendix
WITH_EXERCISES = LESSON + sorted(NOTEBOOKS.glob("*capstone*.ipynb")) + BEYOND
NOT_FOR_LEARNERS = [
    r"\bnbval\b",
    r"\bnbconvert\b",
    r"stored outputs?",
    r"outputs? (is|are) compared",
    r"whose output",
    r"test (suite|command)",
    r"\bCI\b",
    r"re-?executed",
    r"saniti[sz]",
    r"measured (with|on)",
    r"idle machine",
    r"AMD EPYC",
    r"Intel Xeon",
    r"\bAVX",
    r"any CPU",
]


def cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def source(cell):
    return "".join(cell["source"])


def outputs_text(cell):
    texts = []
    for out in cell.get("outputs", []):
        texts.append("".join(out.get("text", "")))
        texts.append("".join(out.get("data", {}).get("text/plain", "")))
    return "\n".join(texts)


def test_the_lesson_holds_at_most_460_cells():
    counts = {p.name: len(cells(p)) for p in LESSON}
    print(counts, sum(counts.values()))
    assert len(LESSON) == 9 and sum(counts.values()) <= 460


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_a_notebook_that_draws_sets_the_series_style_before_its_first_figure(path):
    """Figures drawn in the style's 13-pt text are what lets them read when projected."""
    code = [c for c in cells(path) if c["cell_type"] == "code"]
    drawn = [
        i
        for i, c in enumerate(code)
        if any("image/png" in o.get("data", {}) for o in c.get("outputs", []))
    ]
    styled = [
        i
        for i, c in enumerate(code)
        if re.search(r"^plt\.style\.use\((plotting\.)?STYLE\)", source(c), re.M)
    ]
    if drawn:
        assert styled and styled[0] < drawn[0], f"{path.name}: no plt.style.use(STYLE) first"
    sizes = [
        m.group(1) for c in code for m in re.finditer(r"fontsize=(\"[\w-]+\"|[\d.]+)", source(c))
    ]
    smaller = [v for v in sizes if "small" in v or v[0].isdigit() and float(v) < STYLE_PT]
    assert smaller == [], f"{path.name}: text below the style's {STYLE_PT} pt: {smaller}"


@pytest.mark.parametrize("path", LESSON + BEYOND, ids=lambda p: p.stem)
def test_opens_with_what_it_teaches_what_it_assumes_and_how_long(path):
    opening = source(cells(path)[0])
    assert opening.startswith("# ")
    assert re.search(r"learn", opening, re.I) and re.search(r"(assum|prerequisite)", opening, re.I)
    assert re.search(r"about \d+ minutes", opening)


@pytest.mark.parametrize("path", LESSON + BEYOND, ids=lambda p: p.stem)
def test_prose_speaks_to_learners_only(path):
    for i, cell in enumerate(cells(path)):
        if cell["cell_type"] == "markdown":
            text = source(cell)
            for pattern in NOT_FOR_LEARNERS:
                assert not re.search(pattern, text), f"cell {i}: {pattern!r} in {text[:80]!r}"


def exercises(path):
    """(answer cell index, answer cell, check cell) of every nbgrader exercise."""
    found = []
    nb = cells(path)
    for i, cell in enumerate(nb):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution") and not meta.get("grade"):
            check = next(
                c for c in nb[i + 1 :] if c.get("metadata", {}).get("nbgrader", {}).get("grade")
            )
            found.append((i, cell, check))
    return found


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.stem)
def test_exercises_are_graded_nbgrader_cells(path):
    found = exercises(path)
    assert found, "no exercise"
    ids = [
        c["metadata"]["nbgrader"]["grade_id"] for c in cells(path) if "nbgrader" in c["metadata"]
    ]
    assert len(ids) == len(set(ids)), "grade_ids repeat"
    for i, answer, check in found:
        assert "### BEGIN SOLUTION" in source(answer) and "### END SOLUTION" in source(answer)
        meta = check["metadata"]["nbgrader"]
        assert meta["points"] > 0 and meta["locked"]
        assert re.search(r"### BEGIN HIDDEN TESTS\s+assert ", source(check)), f"cell {i}"


def solution_lines(answer: str):
    regions = [part.split("### END SOLUTION")[0] for part in answer.split("### BEGIN SOLUTION")[1:]]
    lines = [
        re.sub(r"\s+", " ", ln.split("#")[0]).strip() for r in regions for ln in r.splitlines()
    ]
    return [ln for ln in lines if len(ln) >= 25]


def defined_names(answer: str):
    """The functions and classes the answer cell defines at its top level."""
    return re.findall(r"^(?:def|class)\s+(\w+)", answer.split("### BEGIN SOLUTION")[0], re.M)


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.stem)
def test_no_exercise_is_answered_in_a_cell_above_it(path):
    nb = cells(path)
    for i, answer, _ in exercises(path):
        above = [source(c) + "\n" + outputs_text(c) for c in nb[:i]]
        text = re.sub(r"\s+", " ", "\n".join(above))
        for name in defined_names(source(answer)):
            assert not re.search(rf"(def|class)\s+{name}\b", text), (
                f"cell {i}: {name} defined above"
            )
        lines = solution_lines(source(answer))
        shown = [ln for ln in lines if ln in text]
        assert len(shown) <= len(lines) // 2, f"cell {i}: its answer is shown above: {shown[:3]}"
