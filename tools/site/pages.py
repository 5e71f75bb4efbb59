"""The pages of the offline site (:mod:`tools.site.build`): one per notebook, in file-name
order, titled by the notebook's first Markdown heading and described by the paragraph after
it, each linked to the previous and the next."""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional


@dataclass
class Page:
    """One notebook of the series and where its page and its copy go."""

    source: Path
    title: str  # HTML-escaped text of the first heading
    description_md: str  # the first paragraph after that heading (Markdown)
    stem: str = ""
    href: str = ""
    notebook_href: str = ""
    notebook_name: str = ""
    description_html: str = ""
    sections: List[dict] = field(default_factory=list)
    prev: Optional["Page"] = None
    next: Optional["Page"] = None

    def link(self) -> dict:
        return {"href": self.href, "title": self.title}


def first_heading_and_paragraph(markdown_sources: List[str], name: str):
    """The text of the first Markdown heading and the first paragraph after it."""
    text = "\n\n".join(markdown_sources)
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            title = match.group(1).strip()
            break
    else:
        raise ValueError(
            f"notebook {name}: no Markdown heading found; the site takes each "
            "page's title from the notebook's first heading (e.g. '# 09 · Topic')"
        )
    paragraph: List[str] = []
    for line in lines[i + 1 :]:
        if not line.strip():
            if paragraph:
                break
            continue
        if re.match(r"\s{0,3}#{1,6}\s", line):
            break
        paragraph.append(line)
    return title, "\n".join(paragraph)


def markdown_sources(path: Path) -> List[str]:
    """The Markdown cells of a notebook (plain JSON: no nbformat import needed for this)."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = nb["cells"]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"notebook {path.name}: not a notebook file ({error})") from None
    return [
        "".join(c["source"]) if isinstance(c.get("source"), list) else c.get("source", "")
        for c in cells
        if c.get("cell_type") == "markdown"
    ]


def read_pages(notebook_dir: Path) -> List[Page]:
    paths = sorted(notebook_dir.glob("*.ipynb"))
    if not paths:
        raise ValueError(f"--notebooks: no *.ipynb file in {notebook_dir}")
    pages = []
    for path in paths:
        title, description = first_heading_and_paragraph(markdown_sources(path), path.name)
        page = Page(
            source=path, title=html.escape(title), description_md=description, stem=path.stem
        )
        page.href = f"{path.stem}.html"
        page.notebook_name = path.name
        page.notebook_href = f"notebooks/{path.name}"
        pages.append(page)
    for before, after in zip(pages, pages[1:]):
        before.next, after.prev = after, before
    return pages
