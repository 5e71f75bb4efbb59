"""The slide decks of ``bash dev.sh course``, made from the students' version of the notebooks.

No deck shows an exercise's answer before the exercise (each deck's text is compared with its
exercises' worked solutions); every screen opens with a heading; every section has authored
speaker notes whose times are the lesson plan's, section by section; and in Chromium, at
1280 x 720, no slide is taller or wider than the screen, no text on it is under 18 px, and
every figure is drawn large enough for the series style's 13-pt text (its tick labels and
legends) to be 18 px too.
"""

from __future__ import annotations

import base64
import re
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path
from typing import List

import pytest

from browser import RequestLog, open_browser, screenshot_path
from kit_build import NOTEBOOKS, kit
from tools import mark_slides, slide_deck
from transformer_lib import plotting
from tools.kit_base import (
    COURSE,
    Exercise,
    course_notebooks,
    exercises,
    read_notebook,
    solution_region,
    source,
)

NAMES = [p.stem for p in course_notebooks(NOTEBOOKS)]
MIN_FONT_PX = 18
FIGURE_TEXT_PX = plotting.STYLE["font.size"] * plotting.STYLE["figure.dpi"] / 72
SHOWN = ("slide", "subslide", "-", "fragment")


def kind(cell: dict) -> str:
    return cell["metadata"]["slideshow"]["slide_type"]


def md(text: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": text}


# --- the cutting ----------------------------------------------------------------------------


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


def test_a_section_heading_straight_above_a_subheading_is_not_a_slide_of_its_own():
    text = "## 6. The loop\n\n### First, a sanity run\n\nBody.\n\n### Then\n\nMore."
    assert slide_deck.split_text(text) == [
        "## 6. The loop\n\n### First, a sanity run\n\nBody.",
        "### Then\n\nMore.",
    ]


def test_a_screen_taller_than_a_slide_continues_under_its_heading():
    long = "## 3. Long\n\n" + "\n\n".join(f"Paragraph {i} " + "word " * 80 for i in range(12))
    screens = slide_deck.paragraphs_to_fit(long)
    assert len(screens) > 1 and "\n\n".join(screens) == long
    assert all(mark_slides.markdown_height(s) <= mark_slides.SCREEN for s in screens)
    cells = shown([md("# 01 · T"), md(long)])
    opening = [mark_slides.source(c) for c in cells if kind(c) in ("slide", "subslide")]
    assert opening[1].startswith("## 3. Long") and len(opening) == len(screens) + 1
    assert opening[2:] == ["### 3. Long (continued)"] * (len(screens) - 1)


def shown(cells):
    """The cells a deck made of ``cells`` shows (speaker notes left out)."""
    deck = slide_deck.prepare({"cells": cells, "metadata": {}}, "01_embedding")
    return [c for c in deck["cells"] if kind(c) != "notes"]


def test_a_figure_has_a_screen_of_its_own_under_its_sections_heading():
    png = {
        "output_type": "display_data",
        "metadata": {},
        "data": {"image/png": "iVBORw0KGgoAAAANSUhEUgAAA4QAAAFKCAYAAAA=", "text/plain": "F"},
    }
    printed = {"output_type": "stream", "name": "stdout", "text": "after the figure\n"}
    cells = [
        md("# 01 · T"),
        md("## 1. A\n\nSome words."),
        {
            "cell_type": "code",
            "metadata": {},
            "source": "plot()",
            "execution_count": 1,
            "outputs": [png, printed],
        },
    ]
    out = shown(cells)
    assert [(kind(c), mark_slides.source(c)[:25]) for c in out] == [
        ("slide", "# 01 · T"),
        ("slide", "## 1. A\n\nSome words."),
        ("subslide", "### 1. A (continued)"),
        ("-", "plot()"),
        ("subslide", "### 1. A (continued)"),
        ("-", "plot()"),
    ]
    assert out[3]["outputs"] == [png] and out[5]["outputs"] == [printed]
    assert out[3]["metadata"]["transient"]["remove_source"]
    assert out[5]["metadata"]["transient"]["remove_source"]


def test_a_lead_in_opens_the_screen_of_the_figure_it_introduces():
    """A short "...:" sentence before a figure is on the figure's screen, not alone on one."""
    png = {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBORw0KGgo="}}
    figure = {"cell_type": "code", "metadata": {}, "source": "plot()", "outputs": [png]}
    cells = [md("# 01 · T"), md("## 1. A\n\nSome words."), md("One head, up close:"), figure]
    out = shown(cells)
    assert [(kind(c), mark_slides.source(c)[:20]) for c in out] == [
        ("slide", "# 01 · T"),
        ("slide", "## 1. A\n\nSome words."),
        ("subslide", "### 1. A (continued)"),
        ("-", "One head, up close:"),
        ("fragment", "plot()"),
    ]


def test_an_explorer_becomes_a_line_pointing_to_the_notebook():
    widget = {
        "output_type": "display_data",
        "metadata": {},
        "data": {slide_deck.WIDGET: {"model_id": "x"}, "text/plain": "Explorer"},
    }
    cell = {
        "cell_type": "code",
        "id": "e",
        "metadata": {},
        "source": "explorers.masks()",
        "outputs": [widget],
        "execution_count": 1,
    }
    line = slide_deck.explorer_line(cell, "03_attention")
    assert "explorers.masks()" in line["source"] and "03_attention.ipynb" in line["source"]


# --- what the decks show --------------------------------------------------------------------


class Screens(HTMLParser):
    """The text of each screen (a ``<section>`` holding no other) of a reveal.js deck, in
    order, without speaker notes, scripts and styles; whether it has a heading, the heading's
    text, and how many images it shows."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.screens: List[dict] = []
        self.stack: List[dict] = []
        self.hidden = 0
        self.in_heading = False

    def handle_starttag(self, tag, attrs):
        classes = dict(attrs).get("class") or ""
        if tag == "section":
            self.stack.append({"text": [], "head": [], "heading": False, "leaf": True, "img": 0})
            if len(self.stack) > 1:
                self.stack[-2]["leaf"] = False
        elif tag in ("script", "style") or (tag == "aside" and "notes" in classes):
            self.hidden += 1
        elif tag in ("h1", "h2", "h3") and self.stack and not self.hidden:
            self.stack[-1]["heading"] = self.in_heading = True
        elif tag == "img" and self.stack and not self.hidden:
            self.stack[-1]["img"] += 1

    def handle_endtag(self, tag):
        if tag == "section" and self.stack:
            screen = self.stack.pop()
            if screen["leaf"]:
                self.screens.append({"text": "".join(screen["text"]), "heading": screen["heading"],
                                     "head": "".join(screen["head"]), "img": screen["img"]})  # fmt: skip
        elif tag in ("h1", "h2", "h3"):
            self.in_heading = False
        elif tag in ("script", "style", "aside") and self.hidden:
            self.hidden -= 1

    def handle_data(self, data):
        if self.stack and not self.hidden:
            self.stack[-1]["text"].append(data)
            if self.in_heading:
                self.stack[-1]["head"].append(data)


def screens(html: str) -> List[dict]:
    parser = Screens()
    parser.feed(html)
    return parser.screens


def squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def answer_lines(ex: Exercise, full: dict) -> List[str]:
    """The lines of an exercise's worked solution that say something of their own (code of at
    least 24 characters, whitespace aside, that the stub does not hold)."""
    region = solution_region(source(full["cells"][ex.answer_cell]))
    lines = {squeeze(line.split("  #")[0]) for line in region.splitlines()}
    return sorted(line for line in lines if len(line) >= 24 and not line.startswith("#"))


def answers_shown_early(html: str, found: List[Exercise], full: dict) -> List[str]:
    """The lines of an exercise's solution that the deck shows before it states the exercise
    (or anywhere, when it never states it), when they are a third of the solution's lines or
    more (at least two of them; its only one); a line or two in common with the lesson (a
    softmax, a mask) is no answer."""
    text = [squeeze(s["text"]) for s in screens(html)]
    shown = []
    for ex in found:
        stated = next((i for i, t in enumerate(text) if f"Exercise{ex.number}—" in t), None)
        if stated is None:
            shown.append(f"Exercise {ex.number} is not stated in the deck")
        before = "".join(text[: len(text) if stated is None else stated])
        if stated is not None:
            before += text[stated].split(f"Exercise{ex.number}—")[0]
        lines = answer_lines(ex, full)
        early = [f"Exercise {ex.number}: {line}" for line in lines if line in before]
        if len(early) >= max(min(2, len(lines)), -(-len(lines) // 3)):
            shown += early
    return shown


def test_an_answer_shown_before_its_exercise_is_found():
    full = {
        "cells": [
            md("**Exercise 1 — a thing.** Write it."),
            {
                "cell_type": "code",
                "metadata": {},
                "outputs": [],
                "source": "def f(x):\n    ### BEGIN SOLUTION\n    return x.softmax(dim=-1) @ values\n"
                "    ### END SOLUTION",
            },
        ]
    }  # its only line: shown, it is the answer
    ex = Exercise("01_x", 1, "a thing", "", 0, 1, 2, 1.0, "")
    html = (
        "<section><section><p>return x.softmax(dim=-1) @ values</p></section>"
        "<section><p><strong>Exercise 1 — a thing.</strong></p></section></section>"
    )
    assert answers_shown_early(html, [ex], full) == ["Exercise 1: returnx.softmax(dim=-1)@values"]
    later = html.replace("<p>return x.softmax(dim=-1) @ values</p>", "<p>other</p>")
    assert answers_shown_early(later, [ex], full) == []


@pytest.mark.parametrize("name", NAMES)
def test_no_deck_shows_an_answer_before_its_exercise(name):
    full = read_notebook(NOTEBOOKS / f"{name}.ipynb")
    found = exercises(full, name)
    html = (kit() / "slides" / f"{name}.slides.html").read_text(encoding="utf-8")
    assert answers_shown_early(html, found, full) == []


@pytest.mark.parametrize("name", NAMES)
def test_every_screen_opens_with_a_heading(name):
    html = (kit() / "slides" / f"{name}.slides.html").read_text(encoding="utf-8")
    shown = screens(html)
    assert shown
    bare = [squeeze(s["text"])[:60] for s in shown if not s["heading"]]
    assert bare == [], f"{name}: screens without a heading: {bare}"
    alone = [squeeze(s["head"]) for s in shown
             if squeeze(s["text"]) == squeeze(s["head"]) and not s["img"]]  # fmt: skip
    assert alone == [], f"{name}: screens holding their heading alone: {alone}"


# --- the speaker notes ----------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_every_section_has_an_authored_note_and_no_note_is_stale(name):
    path = slide_deck.notes_path(name)
    assert path.is_file(), f"no speaker notes {path.name}"
    full = read_notebook(NOTEBOOKS / f"{name}.ipynb")
    assert slide_deck.notes_problems(full, slide_deck.read_notes(path)) == []


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


ROW = re.compile(r"^\|\s*\d{1,2}:\d\d\s*\|\s*(\d+)\s*\|\s*([^|]+?)\s*\|", re.M)


def plan_minutes(text: str) -> dict:
    """Minutes per section of a plan's timeline (its third column names the section, as the
    notebook's heading does, or ``title`` for the opening, ``—`` for none)."""
    minutes: dict = {}
    for length, section in ROW.findall(text):
        if section != "—":
            minutes[section] = minutes.get(section, 0) + int(length)
    return minutes


def note_minutes(notes: dict) -> dict:
    found = {k: re.search(r"^Time: (\d+) min", v, re.M) for k, v in notes.items()}
    return {k: int(m.group(1)) if m else None for k, m in found.items()}


@pytest.mark.parametrize("name", NAMES)
def test_speaker_notes_give_each_section_the_plans_minutes(name):
    plan = plan_minutes((COURSE / "plans" / f"{name}.md").read_text(encoding="utf-8"))
    notes = note_minutes(slide_deck.read_notes(slide_deck.notes_path(name)))
    title = next(iter(notes))  # the notebook's title: the plan's "title" row
    plan = {title if k == "title" else k: v for k, v in plan.items()}
    unknown = sorted(set(plan) - set(notes))
    assert not unknown, f"{name}: the plan times sections the notebook lacks: {unknown}"
    differ = {k: (plan.get(k, 0), v) for k, v in notes.items() if plan.get(k, 0) != v}
    assert differ == {}, f"{name}: section: (plan, notes) minutes differ: {differ}"


def test_the_timing_check_reads_a_plan_section_by_section():
    plan = (
        "| time | min | section | what |\n|---|---|---|---|\n| 0:00 | 5 | title | recap |\n"
        "| 0:05 | 10 | 1. A | talk |\n| 0:15 | 20 | 1. A | exercise |\n| 0:35 | 5 | — | x |\n"
    )
    assert plan_minutes(plan) == {"title": 5, "1. A": 30}
    assert note_minutes({"T": "Time: 5 min.", "1. A": "Time: 0 min (reading).", "B": ""}) == {
        "T": 5,
        "1. A": 0,
        "B": None,
    }


# --- in the browser -------------------------------------------------------------------------

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
    if (r.bottom > box.bottom + 1 || r.right > box.right + 1)
      problems.push(`${el.tagName}.${el.className} leaves the slide`);
    const text = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    const size = parseFloat(cs.fontSize) * scale;
    if (text && size < smallest) { smallest = size; where = el.textContent.trim().slice(0, 30); }
  }
  const imgs = [...s.querySelectorAll(".jp-OutputArea-output img")];
  const zoom = img => img.getBoundingClientRect().width / scale / img.naturalWidth;
  const zooms = imgs.filter(img => !img.src.startsWith("data:image/svg")).map(zoom);
  const svgs = imgs.filter(img => img.src.startsWith("data:image/svg")).map(
    img => ({zoom: zoom(img), src: img.src.slice(0, 40000)}));
  const heading = s.querySelector("h1, h2, h3");
  return {problems: problems.slice(0, 3), smallest, where, zooms, svgs,
          heading: heading ? heading.textContent.slice(0, 50) : ""};
}"""


@pytest.fixture(scope="module")
def walked():
    """Every slide of every deck as Chromium lays it out at 1280 x 720: (name, number,
    measures); screenshots of the first few slides with a figure."""
    found, shots = [], 0
    with open_browser() as context:
        page = context.new_page()
        page.set_viewport_size({"width": 1280, "height": 720})
        log = RequestLog(page)
        for name in NAMES:
            page.goto((kit() / "slides" / f"{name}.slides.html").as_uri(), wait_until="load")
            page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=60_000)
            for k, ix in enumerate(page.evaluate("Reveal.getSlides().map(Reveal.getIndices)")):
                page.evaluate(f"Reveal.slide({ix['h']}, {ix.get('v') or 0})")
                page.evaluate("MathJax.startup.promise.then(() => true)")  # typeset, fitted
                measured = page.evaluate(MEASURE)
                found.append((name, k + 1, measured))
                if measured["zooms"] and shots < 4:
                    page.screenshot(path=str(screenshot_path(f"slides_{name}_{k + 1:02d}.png")))
                    shots += 1
    assert not log.outside and not log.failed, (log.outside, log.failed)
    return found


def test_every_slide_fits_and_its_text_reads_from_the_back_of_the_room(walked):
    bad = [
        f"{name} slide {k} ({m['heading']!r}): {m['problems']} smallest text "
        f"{m['smallest']:.1f} px ({m['where']!r})"
        for name, k, m in walked
        if m["problems"] or m["smallest"] < MIN_FONT_PX
    ]
    assert bad == [], f"{len(bad)} of {len(walked)} slides do not fit:\n" + "\n".join(bad)


def test_every_figure_is_drawn_large_enough_for_its_text_to_read(walked):
    """A figure's tick labels and legends (the series style's 13-pt text, 18 px in a
    notebook's 100-dpi figure; tests/test_figures.py and tests/test_notebooks.py hold every
    figure to it) must be 18 px on the slide: the deck draws each figure as large as its
    screen allows, so a figure too wide or too tall for that fails here."""
    small = [
        f"{name} slide {k} ({m['heading']!r}): drawn at {z:.2f} of its size"
        for name, k, m in walked
        for z in m["zooms"]
        if z * FIGURE_TEXT_PX < MIN_FONT_PX - 0.05
    ]
    figures = sum(len(m["zooms"]) for _, _, m in walked)
    assert small == [], f"{len(small)} of {figures} figures read small:\n" + "\n".join(small)


def test_every_diagram_is_drawn_large_enough_for_its_text_to_read(walked):
    """An SVG diagram's smallest text (its font-size, in the SVG's own units) at the size the
    slide draws it must be 18 px too."""
    small = []
    for name, k, m in walked:
        for svg in m["svgs"]:
            text = urllib.parse.unquote(svg["src"].split(",", 1)[1])
            if ";base64" in svg["src"].split(",", 1)[0]:
                text = base64.b64decode(svg["src"].split(",", 1)[1] + "==").decode(
                    "utf-8", "replace"
                )
            width = re.search(r'<svg[^>]*\bwidth="([\d.]+)pt"', text)
            box = re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+)', text)
            sizes = [float(x) for x in re.findall(r"font-size: ([\d.]+)px", text)]
            px = min(sizes) * float(width.group(1)) * 96 / 72 / float(box.group(1)) * svg["zoom"]
            if px < MIN_FONT_PX - 0.05:
                small.append(f"{name} slide {k}: smallest diagram text {px:.1f} px")
    assert small == [], "\n".join(small)


def test_decks_load_nothing_from_outside_the_kit():
    for name in NAMES:
        html = (kit() / "slides" / f"{name}.slides.html").read_text(encoding="utf-8")
        outside = re.findall(r"""(?:src|href)=["']((?:https?:)?//[^"']+)""", html)
        assert outside == [], f"{name}: {outside}"
        for local in re.findall(r"""(?:src|href)=["'](?!data:|#)([^"']+)""", html):
            assert (kit() / "slides" / local.split("?")[0]).exists(), f"{name}: {local}"


@pytest.mark.parametrize("name", NAMES)
def test_decks_are_made_from_the_students_version(name):
    """The deck's code is the students': an answer cell it shows reads the stub (the decks
    skip the exercise cells, so it shows none of them)."""
    student = read_notebook(kit() / "student" / "notebooks" / f"{name}.ipynb")
    deck = slide_deck.prepare(student, name)
    shown = [c for c in deck["cells"] if c["cell_type"] == "code" and kind(c) in SHOWN]
    assert not [c for c in shown if c["metadata"].get("nbgrader")]
    assert Path(kit() / "slides" / f"{name}.slides.html").is_file()
