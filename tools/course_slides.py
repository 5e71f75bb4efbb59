"""The kit's slide decks: one reveal.js deck per notebook, built by nbconvert's slides
exporter with the template ``course/templates/course_reveal``, from the cells' slide marks.

A deck loads nothing from outside the kit: reveal.js from ``course/vendor`` and MathJax 3
(``tools/mathjax_files.py``, the site's MathJax) are copied beside the decks.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path
from typing import Dict, Optional

from tools import mark_slides, mathjax_files, slide_deck
from tools.kit_base import COURSE, course_notebooks, source

REVEAL = COURSE / "vendor" / "reveal.js"
TEMPLATES = COURSE / "templates"
MATHJAX_URL = f"mathjax/{mathjax_files.FILE}"  # relative to the decks
CSS_COMMENT = re.compile(r"/\*.*?\*/", re.S)
STYLE = re.compile(r"(<style[^>]*>)(.*?)(</style>)", re.S)


def _without_widgets(nb: dict) -> None:
    """An explorer's stored widget state would make nbconvert load the widget manager from a
    CDN; a deck shows a line pointing to the notebook instead (it is live in JupyterLab)."""
    nb.get("metadata", {}).pop("widgets", None)
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            out.get("data", {}).pop("application/vnd.jupyter.widget-view+json", None)


def slide_cells(nb: dict, name: Optional[str] = None) -> dict:
    """The deck's notebook (from the students' version): a figure's long code hidden, its figure
    kept; cut, marked and given speaker notes by ``tools/slide_deck.py``."""
    name = name or slide_deck.deck_name(nb, [p.stem for p in course_notebooks()])
    nb = slide_deck.prepare(nb, name) if name else copy.deepcopy(nb)
    _without_widgets(nb)
    for cell in nb["cells"]:
        meta = cell.setdefault("metadata", {})
        if (
            cell["cell_type"] == "code"
            and mark_slides.has_figure(cell)
            and len(source(cell).splitlines()) > mark_slides.MAX_CODE_LINES // 2
        ):
            meta["transient"] = {"remove_source": True}
    return nb


def strip_css_comments(html: str) -> str:
    """Drop the comments of the inlined style sheets (JupyterLab's cite web pages there),
    so that the deck holds no address outside the kit."""
    return STYLE.sub(lambda m: m.group(1) + CSS_COMMENT.sub("", m.group(2)) + m.group(3), html)


def slides_exporter():
    from nbconvert import SlidesExporter

    return SlidesExporter(
        extra_template_basedirs=[str(TEMPLATES)],
        template_name="course_reveal",
        reveal_url_prefix="reveal.js",
        reveal_theme="white",
        reveal_transition="none",
        reveal_scroll=False,
        reveal_number="c/t",
        reveal_width="1280",
        reveal_height="720",
        exclude_input_prompt=True,
        exclude_output_prompt=True,
        mathjax_url=MATHJAX_URL,
    )


def build_slides(nbs: Dict[str, dict], out: Path) -> Dict[str, int]:
    """Write ``NN_name.slides.html`` for each notebook into ``out`` (made), with reveal.js
    and MathJax beside them; return each deck's number of slides."""
    import nbformat

    shutil.copytree(REVEAL, out / "reveal.js")
    mathjax_files.copy_into(out / "mathjax")
    exporter = slides_exporter()
    counts = {}
    for name, nb in nbs.items():
        deck = slide_cells(nb, name)
        body, _ = exporter.from_notebook_node(
            nbformat.reads(json.dumps(deck), as_version=4), resources={"metadata": {"name": name}}
        )
        (out / f"{name}.slides.html").write_text(strip_css_comments(body), encoding="utf-8")
        counts[name] = mark_slides.count_slides(deck)
    return counts
