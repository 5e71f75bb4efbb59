"""Claims that span the series: the run times of the notebooks' opening cells and the README's
summary of them, the date task's languages as the README states them, and opening cells that
give one run time on a named CPU rather than the state of the machine."""

import re
from pathlib import Path

import pytest

from notebook_cells import NOTEBOOKS, cells, source

ROOT = Path(__file__).resolve().parent.parent
SERIES = sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
ONE_FIGURE = [
    "01_embedding.ipynb",
    "02_positional_encoding.ipynb",
    "08_inference.ipynb",
    "09_translation.ipynb",
    "10_appendix_performance.ipynb",
]
RUN_TIME = re.compile(
    r"Running it\* top to bottom: (?:about )?(\d+)(?:[–-](\d+))? ?"
    r"(seconds|s|minutes)\b"
)


def run_seconds(name: str) -> int:
    """The run time an opening cell states (the upper end of a range), in seconds."""
    head = " ".join(source(cells(name)[0]).split())
    m = RUN_TIME.search(head)
    assert m, f"{name}: write the run time as '*Running it* top to bottom: about N seconds'"
    value = int(m.group(2) or m.group(1))
    return value * 60 if m.group(3) == "minutes" else value


def readme() -> str:
    return " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())


def test_readme_run_time_is_the_opening_cells_longest_and_shortest():
    times = {name: run_seconds(name) for name in SERIES}
    m = re.search(
        r"every notebook runs top to bottom in under a minute to about (\d+(?:½)?) "
        r"minutes \(the longest, (\d\d)_\w+",
        readme(),
    )
    assert m, "README: the run-time sentence of 'Runs anywhere' changed; update this test"
    longest = max(times, key=times.get)
    assert longest.startswith(m.group(2)), f"the longest is {longest}: {times}"
    stated = float(m.group(1).replace("½", ".5"))
    assert abs(times[longest] / 60 - stated) <= 0.25, (times[longest], stated)
    assert min(times.values()) < 60, times


@pytest.mark.parametrize("name", ONE_FIGURE)
def test_opening_cell_gives_one_run_time_on_a_named_cpu_not_the_machine_s_load(name):
    head = source(cells(name)[0])
    line = head[head.index("*Running it*") :]
    assert re.search(r"2-core (AMD EPYC|Intel Xeon)", " ".join(line.split())), name
    for state in (
        "load average",
        "shared with other",
        "heavy load",
        "while other jobs",
        "over \\d+ runs",
        "nbval",
        "pytest",
    ):
        assert not re.search(state, line), f"{name}: '{state}' in the run time"


@pytest.mark.parametrize("name", ONE_FIGURE)
def test_no_prose_about_what_the_notebook_check_compares(name):
    for cell in cells(name):
        if cell["cell_type"] == "markdown":
            text = " ".join(source(cell).split())
            assert "compared when the notebook is checked" not in text, name
            assert "excluded from the output comparison" not in text, name


def test_readme_gives_the_date_task_five_languages():
    from transformer_lib.data.dates import DATE_FORMATS

    words = {f.split("_")[0] for f in DATE_FORMATS} - {"us", "eu", "iso", "ymd", "compact"}
    assert len(DATE_FORMATS) == 29 and len(words) == 5
    text = readme()
    assert "29 formats in five languages, English, French, German, Spanish and Japanese" in text
    assert "four languages" not in text
