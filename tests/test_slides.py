"""The slide decks of ``bash dev.sh course`` fit a projector: every section opens its own
slide, what a slide introduces with "...:" is on it, explorers become a pointer to the
notebook, every section has authored speaker notes, and (in Chromium, at 1280 x 720) no slide
of any deck is taller or wider than the screen, and no text on it is under 18 px.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from browser import open_browser, screenshot_path
from tools import build_course, mark_slides, slide_deck

ROOT = Path(__file__).resolve().parent.parent

NOTEBOOKS = [p.stem for p in build_course.course_notebooks()]
SHOWN = ("slide", "subslide", "-", "fragment")
MIN_FONT_PX = 18
# a few screens to look at (0-based): titles, a table a lead-in introduces, heatmaps
SCREENSHOTS = {
    "01_embedding": (0, 3),
    "03_attention": (0, 7, 8),
    "04_multi_head_attention": (0, 9),
    "05_encoder": (3, 12),
    "08_inference": (16, 18, 20),
    "09_translation": (12,),
}


def original(name: str) -> dict:
    return json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))


def deck(name: str) -> dict:
    return build_course.slide_cells(
        build_course.read_notebook(ROOT / "notebooks" / f"{name}.ipynb"), name
    )


def kind(cell: dict) -> str:
    return cell["metadata"]["slideshow"]["slide_type"]


def md(text: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": text}


# --- the cutting --------------------------------------------------------------------------


def test_a_mid_cell_heading_opens_its_own_slide():
    text = "Last words of section 1.\n\n## 2. Next\n\nBody.\n\n```python\n## not a heading\n```"
    assert slide_deck.split_text(text) == [
        "Last words of section 1.",
        "## 2. Next\n\nBody.\n\n```python\n## not a heading\n```",
    ]
    nb = {"cells": [md("# 01 · Title"), md("Intro."), md(text)], "metadata": {}}
    cells = slide_deck.prepare(nb, "01_embedding")["cells"]
    assert [mark_slides.source(c).split("\n")[0] for c in cells] == [
        "# 01 · Title",
        "Intro.",
        "Last words of section 1.",
        "## 2. Next",
    ]
    assert [kind(c) for c in cells] == ["slide", "-", "-", "slide"]


def test_a_screen_taller_than_a_slide_continues_on_the_next():
    long = "## 3. Long\n\n" + "\n\n".join(f"Paragraph {i} " + "word " * 80 for i in range(12))
    screens = slide_deck.paragraphs_to_fit(long)
    assert len(screens) > 1 and "\n\n".join(screens) == long
    assert all(mark_slides.markdown_height(s) <= mark_slides.SCREEN for s in screens)
    cells = slide_deck.prepare(
        {"cells": [md("# 01 · T"), md(long)], "metadata": {}}, "01_embedding"
    )["cells"]
    assert [kind(c) for c in cells] == ["slide", "slide"] + ["subslide"] * (len(screens) - 1)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_slide_opens_with_its_heading(name):
    cells = [c for c in deck(name)["cells"] if kind(c) == "slide"]
    for cell in cells[1:]:
        first = mark_slides.source(cell).lstrip().split("\n")[0]
        assert first.startswith("## "), f"{name}: a section slide opens with {first[:60]!r}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_what_a_slide_introduces_with_a_colon_is_on_it(name):
    cells = [c for c in deck(name)["cells"] if kind(c) != "notes"]
    for cell, follower in zip(cells, cells[1:]):
        text = mark_slides.source(cell).strip()
        if cell["cell_type"] == "markdown" and kind(cell) in SHOWN and text.endswith(":"):
            assert kind(follower) in SHOWN or "solution" in follower["metadata"].get("tags", []), (
                f"{name}: {text[-70:]!r} introduces a cell the slide skips"
            )


def test_the_cases_of_the_issue_show_their_tables():
    wanted = {
        "01_embedding": "the RMS of section 3:",
        "03_attention": "Measured on random vectors:",
        "05_encoder": "Three positions with very different scales:",
    }
    for name, lead in wanted.items():
        cells = [c for c in deck(name)["cells"] if kind(c) != "notes"]
        i = next(i for i, c in enumerate(cells) if mark_slides.source(c).strip().endswith(lead))
        assert kind(cells[i + 1]) in SHOWN and cells[i + 1]["outputs"], (name, lead)
    # 08's step probabilities ("Here are the steps ...") and its probes of section 6 (an
    # override): shown by their output
    cells = deck("08_inference")["cells"]
    for start in ('example = "Friday', "probes = ["):
        cell = next(c for c in cells if mark_slides.source(c).startswith(start))
        assert kind(cell) in SHOWN and cell["metadata"]["transient"]["remove_source"], start


def test_prose_announces_what_follows():
    assert mark_slides.announces("Measured on random vectors:")
    assert mark_slides.announces("Text.\n\nHere are the steps for one input.")
    assert not mark_slides.announces("Here is a claim. And more.\n\nA last paragraph.")


def test_an_explorer_becomes_a_line_pointing_to_the_notebook():
    cells = deck("03_attention")["cells"]
    widgets = [
        c
        for c in cells
        if any(slide_deck.WIDGET in o.get("data", {}) for o in c.get("outputs", []))
    ]
    pointers = [c for c in cells if "Live in the notebook" in mark_slides.source(c)]
    assert widgets == [] and len(pointers) == 1
    assert "explorers.masks()" in mark_slides.source(pointers[0]) and kind(pointers[0]) in SHOWN


def test_a_heatmap_has_a_screen_of_its_own():
    cells = [c for c in deck("08_inference")["cells"] if kind(c) in SHOWN]
    maps = [i for i, c in enumerate(cells) if mark_slides.is_heatmap(c)]
    assert maps
    for i in maps:
        assert kind(cells[i]) in ("slide", "subslide"), "a heatmap shares its screen"
        assert "slide-heatmap" in cells[i]["metadata"]["tags"]
    # the 2 x 4 grids of cross-attention (1098 x 1159 pixels) are cut into two halves, one
    # layer each, so that each is drawn as wide as the slide
    sizes = [
        mark_slides.figure_size(o)
        for i in maps
        for o in cells[i]["outputs"]
        if mark_slides.figure_size(o)
    ]
    assert len(sizes) >= 6 and all(h <= 0.6 * w for w, h in sizes), sizes
    original_sizes = [
        mark_slides.figure_size(o)
        for c in original("08_inference")["cells"]
        for o in c.get("outputs", [])
        if mark_slides.figure_size(o)
    ]
    assert any(h > w for w, h in original_sizes)


# --- the speaker notes --------------------------------------------------------------------


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_section_has_an_authored_note_and_no_note_is_stale(name):
    path = slide_deck.notes_path(name)
    assert path.is_file(), f"no speaker notes {path.relative_to(ROOT)}"
    notes = slide_deck.read_notes(path)
    assert slide_deck.notes_problems(original(name), notes) == []
    cells = deck(name)["cells"]
    attached = [c for c in cells if c.get("id", "").startswith("speaker-note-")]
    assert len(attached) == len(slide_deck.sections(original(name)))
    assert all(kind(c) == "notes" for c in attached)


def test_notes_checks_can_fail():
    nb = {"cells": [md("# 01 · T"), md("## 1. A"), md("## 2. B")]}
    notes = {
        "01 · T": "Time: 1 min.\nPoint at: x.\nAsk: y?",
        "1. A": "Time: 2 min.",
        "9. Gone": "Time: 1 min.\nPoint at: x.\nAsk: y?",
    }
    assert slide_deck.notes_problems(nb, notes) == [
        "no note for the section '2. B'",
        "a note for '9. Gone', which is no section of the notebook",
        "the note for '1. A' lacks 'Point at:'",
        "the note for '1. A' lacks 'Ask:'",
    ]


# --- in the browser -----------------------------------------------------------------------

MEASURE = """() => {
  const s = Reveal.getCurrentSlide(), box = s.getBoundingClientRect(), scale = Reveal.getScale();
  const problems = [];
  if (s.scrollHeight > s.clientHeight + 1) problems.push(`taller: ${s.scrollHeight} px`);
  if (s.scrollWidth > s.clientWidth + 1) problems.push(`wider: ${s.scrollWidth} px`);
  let smallest = 1e9, where = "";
  for (const el of s.querySelectorAll("*")) {
    if (el.closest("aside.notes, mjx-container, script")) continue;
    const cs = getComputedStyle(el), r = el.getBoundingClientRect();
    if (cs.display === "none" || (r.width === 0 && r.height === 0)) continue;
    if (["auto", "scroll", "hidden"].includes(cs.overflowX) && el.scrollWidth > el.clientWidth + 1)
      problems.push(`${el.tagName}.${el.className} scrolls sideways`);
    if (["auto", "scroll"].includes(cs.overflowY) && el.scrollHeight > el.clientHeight + 1)
      problems.push(`${el.tagName}.${el.className} scrolls`);
    if (r.bottom > box.bottom + 1 || r.right > box.right + 1)
      problems.push(`${el.tagName}.${el.className} leaves the slide`);
    const text = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    const size = parseFloat(cs.fontSize) * scale;
    if (text && size < smallest) { smallest = size; where = el.textContent.trim().slice(0, 30); }
  }
  const heading = s.querySelector("h1, h2, h3");
  return {problems: problems.slice(0, 3), smallest, where,
          heading: heading ? heading.textContent.slice(0, 50) : ""};
}"""


@pytest.fixture(scope="module")
def decks(tmp_path_factory):
    out = tmp_path_factory.mktemp("decks") / "slides"
    nbs = {p.stem: build_course.read_notebook(p) for p in build_course.course_notebooks()}
    return out, build_course.build_slides(nbs, out)


def test_no_slide_of_any_deck_overflows_at_1280x720(decks):
    out, counts = decks
    bad, walked = [], 0
    with open_browser() as context:
        page = context.new_page()
        page.set_viewport_size({"width": 1280, "height": 720})
        for name in NOTEBOOKS:
            page.goto((out / f"{name}.slides.html").as_uri(), wait_until="load")
            page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=30_000)
            indices = page.evaluate("Reveal.getSlides().map(s => Reveal.getIndices(s))")
            assert len(indices) == counts[name]
            for k, ix in enumerate(indices):
                page.evaluate(f"Reveal.slide({ix['h']}, {ix.get('v') or 0})")
                page.evaluate("MathJax.startup.promise.then(() => true)")  # typeset, fitted
                m = page.evaluate(MEASURE)
                walked += 1
                if m["problems"] or m["smallest"] < MIN_FONT_PX:
                    bad.append(
                        f"{name} slide {k + 1} ({m['heading']!r}): {m['problems']} "
                        f"smallest text {m['smallest']:.1f} px ({m['where']!r})"
                    )
                if k in SCREENSHOTS.get(name, ()):  # every fragment shown
                    page.evaluate("while (Reveal.nextFragment()) {}")
                    page.wait_for_timeout(300)
                    page.screenshot(path=str(screenshot_path(f"slides_{name}_{k + 1:02d}.png")))
    assert walked == sum(counts.values())
    assert bad == [], f"{len(bad)} of {walked} slides do not fit:\n" + "\n".join(bad)
