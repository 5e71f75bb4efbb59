"""Printable PDF handouts of the teaching kit: each slide deck and each notebook as a PDF.

    from tools.handouts import write_handouts
    written = write_handouts(out, decks=[...slides.html], notebooks=[...ipynb])

Made offline by headless Chromium's print-to-PDF: Debian's ``chromium`` package, driven by
Playwright with ``executable_path`` (no browser is ever downloaded), every request that is not
a local file refused.

- A deck (``NN_name.slides.html`` of ``tools/build_course.py``) is opened in reveal.js's print
  mode (``?print-pdf``), with fragments shown at once and one page per slide
  (``pdfSeparateFragments=false``, ``pdfMaxPagesPerSlide=1``); reveal.js sets the page size to
  the slide's, 1280 x 720 px. The math is typeset (the deck's MathJax 3) and the deck's own
  ``fitFigures`` shrinks a figure that is still too tall, as it does on screen. The PDF has as
  many pages as the deck has slides.
- A notebook is rendered as a page of the offline site (``tools/site/build.py``: JupyterLab's
  cell styles, figures, MathJax 3 in SVG) and printed on A4 once its math is typeset
  (``<html data-math="typeset">``), without the site's navigation, with code and printouts
  wrapped at the page's width, the notebook's title and the page number in the footer.

``build_course.py`` passes the students' version of the notebooks and every deck; ``bash dev.sh
course --no-handouts`` skips the handouts.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from tools.chromium import FLAGS, locate
from tools.site import build as site_build

INSTALL_HINT = (
    "install Debian's chromium (sudo apt-get install chromium) and the dev extra "
    "(pip install -c constraints.txt -e '.[dev]'), or build with --no-handouts"
)
TIMEOUT_MS = 120_000  # to load a page and lay out its slides, on a busy 2-core CPU
DECK_QUERY = "?print-pdf&pdfSeparateFragments=false&pdfMaxPagesPerSlide=1&showNotes=false"
# waits (up to a minute) until the page's MathJax 3 has typeset every formula
# (MathJax.startup.promise resolves); true at once on a page without math
MATH_TYPESET = """async () => {
  for (let i = 0; i < 600; i++) {
    const M = window.MathJax;
    if (M && M.startup && M.startup.promise) { await M.startup.promise; return true; }
    if (!M && document.readyState === "complete") return true;
    await new Promise(resolve => setTimeout(resolve, 100));
  }
  return false;
}"""
# reveal.js's print style sets every slide's padding to 0; the deck's margins of
# course/templates/course_reveal/index.html.j2 back, so that a page is the screen
DECK_CSS = """
html.reveal-print .reveal .slides .pdf-page > section:not(.stack) {
    padding: 18px 40px !important;
}
"""
# the deck's own fitFigures on every slide (on screen it runs on the slide shown); then the
# slides whose content is still taller than the page (cut at the bottom of the PDF)
FIT_EVERY_SLIDE = """() => {
  const slides = [...document.querySelectorAll('.pdf-page > section')];
  if (typeof fitFigures === 'function') slides.forEach(fitFigures);
  return slides.filter(s => s.scrollHeight > s.clientHeight + 1).length;
}"""
NOTEBOOK_CSS = """
@page { size: A4; }
.site-nav { display: none !important; }
body.site-page main { max-width: none; padding: 0; }
pre { white-space: pre-wrap !important; overflow-wrap: anywhere; }
.jp-OutputArea-output img, .jp-OutputArea-output svg { max-width: 100% !important; height: auto; }
.jp-InputArea, .jp-OutputArea-output img, .jp-OutputArea-output svg, table, mjx-container
    { break-inside: avoid; }
h1, h2, h3 { break-after: avoid; }
"""
FOOTER = (
    '<div style="font-size:8px;width:100%;margin:0 14mm;color:#57606a;'
    'font-family:sans-serif;display:flex;justify-content:space-between">'
    '<span class="title"></span><span><span class="pageNumber"></span> / '
    '<span class="totalPages"></span></span></div>'
)
MARGIN = {"top": "14mm", "bottom": "16mm", "left": "14mm", "right": "14mm"}
# the site's 16 px text printed at about 10 pt, so that a 100-character line of code (the
# project's line length) fits the A4 column unwrapped
SCALE = 0.85


class HandoutError(RuntimeError):
    """A handout cannot be made; the message says which and why."""


class NoBrowser(HandoutError):
    """Chromium or Playwright is missing: no handout can be made on this machine."""


@dataclass
class Handout:
    """One PDF written: what it was made from, where, and (for a deck) its number of pages."""

    source: Path
    pdf: Path
    kind: str  # "slides" or "notebook"
    pages: Optional[int]  # the pages reveal.js laid out (a deck); None for a notebook
    seconds: float

    @property
    def size_kb(self) -> float:
        return self.pdf.stat().st_size / 1024


def chromium() -> str:
    """The Chromium executable (``$CHROMIUM``, or on ``PATH``), with Playwright importable."""
    path, missing = locate()
    if missing:
        raise NoBrowser(f"{missing}: {INSTALL_HINT}")
    return path


def local_only(context) -> None:
    """Refuse every request that leaves the file system (the handouts are made offline)."""
    context.route(re.compile(r"^(https?|wss?|ftp)://"), lambda route: route.abort())


def print_deck(context, deck: Path, pdf: Path, log: Callable[[str], None]) -> int:
    """Print one reveal.js deck, a page per slide; return the number of pages laid out."""
    page = context.new_page()
    try:
        page.set_viewport_size({"width": 1280, "height": 720})
        page.goto(deck.resolve().as_uri() + DECK_QUERY, wait_until="load")
        page.wait_for_function(
            "document.querySelectorAll('.pdf-page').length > 0", timeout=TIMEOUT_MS
        )
        page.add_style_tag(content=DECK_CSS)
        if not page.evaluate(MATH_TYPESET):
            raise HandoutError(f"{deck.name}: MathJax did not finish typesetting in a minute")
        cut = page.evaluate(FIT_EVERY_SLIDE)
        pages = page.evaluate("document.querySelectorAll('.pdf-page').length")
        slides = page.evaluate("Reveal.getSlides().length")
        if pages != slides:
            raise HandoutError(f"{deck.name}: reveal.js laid out {pages} pages for {slides} slides")
        if cut:
            log(f"handouts/: {deck.name}: {cut} slide(s) taller than a page, cut at the bottom")
        page.pdf(path=str(pdf), prefer_css_page_size=True, print_background=True)
        return pages
    finally:
        page.close()


def print_page(context, html: Path, pdf: Path) -> None:
    """Print one page of the offline site on A4, once MathJax 3 has typeset it."""
    page = context.new_page()
    try:
        page.goto(html.resolve().as_uri(), wait_until="load")
        page.wait_for_function(
            "document.documentElement.getAttribute('data-math') === 'typeset'", timeout=TIMEOUT_MS
        )
        page.add_style_tag(content=NOTEBOOK_CSS)
        page.pdf(
            path=str(pdf),
            format="A4",
            print_background=True,
            margin=MARGIN,
            scale=SCALE,
            display_header_footer=True,
            header_template="<span></span>",
            footer_template=FOOTER,
        )
    finally:
        page.close()


def site_pages(notebooks: Sequence[Path], folder: Path) -> List[Path]:
    """The notebooks as pages of the offline site, built into ``folder``; in their order."""
    sources = folder / "notebooks"
    sources.mkdir(parents=True)
    for path in notebooks:
        shutil.copy2(path, sources / path.name)
    try:
        site_build.build(folder / "site", sources)
    except (ValueError, RuntimeError) as err:
        raise HandoutError(f"the notebooks' pages could not be built: {err}") from None
    return [folder / "site" / f"{path.stem}.html" for path in notebooks]


def print_one(context, source: Path, pdf: Path, kind: str, log: Callable[[str], None]) -> Handout:
    """Print a deck (``kind`` "slides") or a site page ("notebook") into ``pdf``."""
    from playwright.sync_api import Error as PlaywrightError

    start = time.perf_counter()
    try:
        count = (
            print_deck(context, source, pdf, log)
            if kind == "slides"
            else print_page(context, source, pdf)
        )
    except PlaywrightError as err:
        raise HandoutError(f"{source.name}: printing failed: {str(err).splitlines()[0]}") from None
    return Handout(source, pdf, kind, count, time.perf_counter() - start)


def write_handouts(
    out: Path,
    decks: Sequence[Path] = (),
    notebooks: Sequence[Path] = (),
    log: Callable[[str], None] = print,
) -> List[Handout]:
    """Write ``out/NN_name.slides.pdf`` for each deck and ``out/NN_name.pdf`` for each notebook.

    ``decks``: reveal.js decks written by ``tools/build_course.py``; ``notebooks``: ``.ipynb``
    files with stored outputs (the kit passes the students' version). Raises ``NoBrowser`` when
    Chromium or Playwright is missing, ``HandoutError`` when a page cannot be printed."""
    decks, notebooks = [Path(p) for p in decks], [Path(p) for p in notebooks]
    missing = [str(p) for p in decks + notebooks if not p.is_file()]
    if missing:
        raise HandoutError(f"no such deck or notebook: {', '.join(missing)}")
    executable = chromium()
    began = time.perf_counter()
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    written: List[Handout] = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        pages = site_pages(notebooks, Path(tmp)) if notebooks else []
        browser = pw.chromium.launch(executable_path=executable, headless=True, args=FLAGS)
        try:
            context = browser.new_context()
            local_only(context)
            jobs = [(d, out / f"{d.name.removesuffix('.html')}.pdf", "slides") for d in decks]
            jobs += [(p, out / f"{p.stem}.pdf", "notebook") for p in pages]
            written = [print_one(context, *job, log=log) for job in jobs]
        finally:
            browser.close()
    log(
        f"handouts/: {len(decks)} decks, {len(notebooks)} notebooks, "
        f"{sum(h.size_kb for h in written) / 1024:.1f} MB in "
        f"{time.perf_counter() - began:.0f} s"
    )
    return written
