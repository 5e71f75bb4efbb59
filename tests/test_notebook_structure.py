"""The shape every notebook of the series keeps: an opening cell with objectives,
prerequisites and honest times; exercises posed in prose, then a stub, a check and a hidden
worked solution, with no checker run before its exercise is posed; figures that fit a
notebook column; every numbered pitfall referred to is defined where it is read; no engineering aside in the teaching
path (the appendix, 10, holds those)."""

import re

import pytest

from notebook_cells import NOTEBOOKS, cells, output_text, png_widths, source

SERIES = sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
TEACHING = [n for n in SERIES if "appendix" not in n]
# checked exercises per notebook; the others pose three
EXERCISES = {
    "03_attention.ipynb": 1,
    "05_encoder.ipynb": 4,
    "06_decoder.ipynb": 5,
    "07_training.ipynb": 3,
}
CHECK = re.compile(r"\bcheck_\w+\(")


def test_the_series_is_nine_notebooks_and_an_appendix():
    assert len(TEACHING) == 9 and SERIES[-1] == "10_appendix_performance.ipynb"
    assert SERIES[3] == "04_multi_head_attention.ipynb" and SERIES[8] == "09_translation.ipynb"


@pytest.mark.parametrize("name", SERIES)
def test_opening_cell_states_objectives_prerequisites_and_times(name):
    head = source(cells(name)[0])
    for words in ("What you will learn", "Prerequisites", "20-minute skim", "Running it"):
        assert words in head, f"{name}: the opening cell lacks '{words}'"
    if name in TEACHING:
        assert "First reading with the exercises" in head
    assert re.search(r"Running it\* top to bottom:.{0,80}?\d+ ?(s|seconds)\b", head, re.S)
    assert not re.search(r"PLACEHOLDER|RUNTIME|__", head)


@pytest.mark.parametrize("name", TEACHING)
def test_exercises_are_posed_then_stubbed_checked_and_solved(name):
    nb = cells(name)
    posed_at = next(
        i for i, c in enumerate(nb) if c["cell_type"] == "markdown" and "## Exercises" in source(c)
    )
    first_check = min(
        i for i, c in enumerate(nb) if c["cell_type"] == "code" and CHECK.search(source(c))
    )
    assert first_check > posed_at, f"{name}: cell {first_check} runs a checker before the exercises"
    checks = [
        i
        for i, c in enumerate(nb)
        if c["cell_type"] == "code"
        and CHECK.search(source(c))
        and "solution" not in c["metadata"].get("tags", [])
    ]
    assert len(checks) == EXERCISES.get(name, 3), (
        f"{name}: one check cell per exercise, got {checks}"
    )
    for i in checks:
        prose, stub, check, sol = nb[i - 2], nb[i - 1], nb[i], nb[i + 1]
        assert prose["cell_type"] == "markdown" and "Exercise" in source(prose)
        assert "raise NotImplementedError" in source(stub) and not CHECK.search(source(stub))
        defined = re.search(r"^(?:def|class) (\w+)", source(stub), re.M).group(1)
        assert f"`{defined}(" in source(prose), (
            f"{name}: the exercise text does not name `{defined}`"
        )
        assert re.search(rf"\({defined}[,)]", source(check))
        assert sol["metadata"].get("tags") == ["solution"]
        assert sol["metadata"].get("jupyter", {}).get("source_hidden") is True
        assert CHECK.search(source(sol)).group(0) == CHECK.search(source(check)).group(0)
        assert "not implemented yet" in output_text(check)  # an untouched stub: no error
        assert ": correct" in output_text(sol)


@pytest.mark.parametrize("name", SERIES)
def test_stored_figures_fit_a_notebook_column(name):
    assert max(png_widths(name), default=0) <= 1200


@pytest.mark.parametrize("name", TEACHING)
def test_pitfall_references_resolve_and_no_engineering_aside(name):
    text = "\n".join(source(c) for c in cells(name))
    defined = set(re.findall(r"^#+ Pitfall (\d+)", text, re.M))
    for number in re.findall(r"pitfall (\d+)", text, re.I):
        assert number in defined, f"{name}: 'pitfall {number}' is not defined in this notebook"
    for aside in ("compiled kernel", "cpu_kernels", "of_relu", "nbval", "_Beam"):
        assert aside not in text, f"{name}: '{aside}' belongs in the appendix"


@pytest.mark.parametrize("name", SERIES)
def test_learners_read_no_test_machinery_in_the_code(name):
    for cell in cells(name):
        assert "NBVAL" not in source(cell), f"{name}: use the cell tag nbval-ignore-output"
