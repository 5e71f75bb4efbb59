"""The printable PDF handouts of the kit (tools/handouts.py): one deck and one students'
notebook of the kit printed by headless Chromium, then opened with a real PDF parser (pypdf).
The deck has a page per slide, 1280 x 720 px; the notebook is on A4, several pages, its title
on the first, its math typeset and its figures in; no page of either shows an exercise's
worked solution before the page that states the exercise. Like tests/test_slides.py, the
browser test runs under ``CI=true`` and elsewhere skips with a one-line install hint when
Chromium is missing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from browser import chromium_path
from kit_build import NOTEBOOKS, kit
from test_slides import answer_lines, squeeze
from tools import build_course, handouts
from tools.kit_base import exercises, read_notebook

ROOT = Path(__file__).resolve().parent.parent

NAME = "01_embedding"  # the shortest deck and notebook of the series
PT_PER_PX = 0.75  # CSS pixels at 96 per inch, PDF points at 72


def first_heading(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    text = "".join(cells[0]["source"])
    return text.split("\n")[0].lstrip("# ").strip()


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    """One deck and one notebook printed, as the kit prints them."""
    chromium_path()  # skip (or fail in CI) without a browser
    tmp = tmp_path_factory.mktemp("handouts")
    notebook = kit() / "student" / "notebooks" / f"{NAME}.ipynb"
    readme = (kit() / "README.md").read_text(encoding="utf-8")
    slides = int(readme.split(f"| `slides/{NAME}.slides.html` | ")[1].split(" ")[0])
    lines = []
    written = handouts.write_handouts(
        tmp / "handouts",
        decks=[kit() / "slides" / f"{NAME}.slides.html"],
        notebooks=[notebook],
        log=lines.append,
    )
    return {h.kind: h for h in written}, slides, notebook, lines


def test_no_page_shows_an_answer_before_its_exercise(printed):
    import pypdf

    made, _, _, _ = printed
    full = read_notebook(NOTEBOOKS / f"{NAME}.ipynb")
    found = exercises(full, NAME)
    for handout in made.values():
        pages = [squeeze(page.extract_text()) for page in pypdf.PdfReader(handout.pdf).pages]
        for ex in found:
            stated = next(i for i, t in enumerate(pages) if f"Exercise{ex.number}—" in t)
            before = "".join(pages[:stated]) + pages[stated].split(f"Exercise{ex.number}—")[0]
            shown = [line for line in answer_lines(ex, full) if line in before]
            assert not shown, f"{handout.pdf.name}, Exercise {ex.number}: {shown}"


def test_the_deck_has_a_page_per_slide(printed):
    import pypdf

    made, slides, _, lines = printed
    deck = made["slides"]
    assert deck.pdf.name == f"{NAME}.slides.pdf" and deck.pages == slides
    reader = pypdf.PdfReader(deck.pdf)
    assert len(reader.pages) == slides, f"{len(reader.pages)} pages for {slides} slides"
    for page in reader.pages:  # the slide's own size: 1280 x 720 px
        assert (float(page.mediabox.width), float(page.mediabox.height)) == pytest.approx(
            (1280 * PT_PER_PX, 720 * PT_PER_PX), abs=1
        )
    assert "Token embeddings" in reader.pages[0].extract_text()
    assert lines and lines[-1].startswith("handouts/: 1 decks, 1 notebooks, ")
    print(f"deck: {len(reader.pages)} pages, {deck.size_kb:.0f} kB, {deck.seconds:.1f} s")


def test_the_notebook_is_on_a4_with_its_title_math_and_figures(printed):
    import pypdf

    made, _, notebook, _ = printed
    handout = made["notebook"]
    assert handout.pdf.name == f"{NAME}.pdf"
    reader = pypdf.PdfReader(handout.pdf)
    assert len(reader.pages) > 1
    width, height = (float(x) for x in reader.pages[0].mediabox[2:])
    assert (width, height) == pytest.approx((595.9, 842.9), abs=1), "A4"
    first = reader.pages[0].extract_text()
    title = first_heading(notebook)  # '01 · Token embeddings'
    assert title.split("·")[-1].strip() in first, first[:200]
    assert "\\sqrt" not in first and "$" not in first, "TeX left untypeset on page 1"
    assert any(len(page.images) for page in reader.pages), "no figure in the PDF"
    last = reader.pages[-1].extract_text()  # the site's navigation is not printed
    assert "Contents" not in first + last and f"{NAME}.ipynb" not in first + last
    assert f"{len(reader.pages)} / {len(reader.pages)}" in last, "the footer's page number"
    print(f"notebook: {len(reader.pages)} pages, {handout.size_kb:.0f} kB, {handout.seconds:.1f} s")


# --- without a browser ------------------------------------------------------------------------


def test_a_missing_source_is_named(tmp_path):
    with pytest.raises(handouts.HandoutError, match=r"no such deck or notebook: .*nope\.ipynb"):
        handouts.write_handouts(tmp_path, notebooks=[tmp_path / "nope.ipynb"])


def test_a_missing_browser_says_how_to_install_it_or_skip(tmp_path, monkeypatch):
    monkeypatch.delenv("CHROMIUM", raising=False)
    monkeypatch.setattr(handouts.shutil, "which", lambda name: None)
    deck = tmp_path / "01_x.slides.html"
    deck.write_text("<html></html>")
    with pytest.raises(
        handouts.NoBrowser,
        match=r"no chromium executable on PATH: install "
        r"Debian's chromium .* or build with --no-handouts",
    ):
        handouts.write_handouts(tmp_path / "out", decks=[deck])
    assert not (tmp_path / "out").exists()


# --- the hook in the kit's build ---------------------------------------------------------------


def test_the_kit_prints_every_deck_and_students_notebook(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(
        handouts,
        "write_handouts",
        lambda out, decks, notebooks, log: calls.append((out, decks, notebooks)),
    )
    build_course.build_handouts(tmp_path, ["01_a", "02_b"])
    assert calls == [
        (
            tmp_path / "handouts",
            [tmp_path / "slides" / "01_a.slides.html", tmp_path / "slides" / "02_b.slides.html"],
            [
                tmp_path / "student" / "notebooks" / "01_a.ipynb",
                tmp_path / "student" / "notebooks" / "02_b.ipynb",
            ],
        )
    ]


def test_the_kit_without_a_browser_is_built_with_one_line(tmp_path, monkeypatch):
    def no_browser(*args, **kwargs):
        raise handouts.NoBrowser("no chromium executable on PATH: install it")

    monkeypatch.setattr(handouts, "write_handouts", no_browser)
    lines = []
    build_course.build_handouts(tmp_path, ["01_a"], log=lines.append)
    assert lines == ["handouts/: not made: no chromium executable on PATH: install it"]

    def broken(*args, **kwargs):
        raise handouts.HandoutError("01_a.slides.html: printing failed: crashed")

    monkeypatch.setattr(handouts, "write_handouts", broken)
    with pytest.raises(build_course.BuildError, match=r"^01_a\.slides\.html: printing failed"):
        build_course.build_handouts(tmp_path, ["01_a"])


def test_the_command_line_prints_handouts_unless_told_not_to(monkeypatch, tmp_path):
    asked = []
    monkeypatch.setattr(
        build_course, "build", lambda out, make_handouts, notebooks: asked.append(make_handouts)
    )
    assert build_course.main(["--out", str(tmp_path / "kit")]) == 0
    assert build_course.main(["--out", str(tmp_path / "kit"), "--no-handouts"]) == 0
    assert asked == [True, False]
