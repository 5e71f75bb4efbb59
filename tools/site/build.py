"""Build the offline static site of the notebook series (``bash dev.sh site``).

    python -m tools.site.build [--out build/site] [--notebooks notebooks]

Every ``notebooks/*.ipynb`` becomes one page, in file-name order, from its stored outputs
(nothing is re-executed: CI already checks that the outputs match the code). The page's
title is the notebook's first heading; the contents page (``index.html``) shows each
notebook's first paragraph after that heading and its sections. Each page links to the
previous and next notebook, to the contents and to a copy of the ``.ipynb``.

Everything a page loads lies in the output folder, so the site works from a USB stick or a
file share with no network: JupyterLab's cell styles (from nbconvert), figures as files, and
MathJax 3 (``tools/mathjax_files.py``: the slide decks' MathJax too; SVG output, so no web
fonts are needed). The output folder is replaced only when it is safe
(``tools/output_folder.py``).
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import sys
import time
from pathlib import Path
from typing import List

from tools import mathjax_files, output_folder
from tools.site.pages import Page, first_heading_and_paragraph, read_pages

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = Path(__file__).resolve().parent / "templates"
SITE_CSS = Path(__file__).resolve().parent / "site.css"
MARKER = ".series-site"  # written into the output folder; only such a folder is replaced


def lab_static_css() -> str:
    """JupyterLab's notebook styles as nbconvert's 'lab' template ships them (light theme)."""
    from jupyter_core.paths import jupyter_path

    for base in jupyter_path("nbconvert", "templates"):
        static = Path(base) / "lab" / "static"
        if (static / "index.css").is_file():
            return "\n".join(
                (static / name).read_text(encoding="utf-8")
                for name in ("index.css", "theme-light.css")
            )
    raise RuntimeError("nbconvert's 'lab' template (lab/static/index.css) was not found")


def markdown_html(source: str) -> str:
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    return markdown2html_mistune(source)


SECTION = re.compile(r'<h2 id="([^"]+)">(.*?)<a class="anchor-link"', re.S)


def exporter():
    """nbconvert's HTML exporter with the site's template; figures go to files."""
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    config = Config()
    config.HTMLExporter.template_name = "series"
    config.HTMLExporter.extra_template_basedirs = [str(TEMPLATES)]
    config.HTMLExporter.exclude_anchor_links = False
    config.ExtractOutputPreprocessor.enabled = True
    config.ExtractOutputPreprocessor.extract_output_types = {"image/png", "image/jpeg"}
    return HTMLExporter(config=config)


def page_resources(page: Page, series_title: str) -> dict:
    """What the 'series' template needs of a page besides the notebook."""
    return {
        "metadata": {"name": page.stem, "path": str(page.source.parent)},
        "output_files_dir": f"{page.stem}_files",
        "site": {
            "series_title": series_title,
            "page": {
                "title": page.title,
                "notebook_href": page.notebook_href,
                "notebook_name": page.notebook_name,
                "prev": page.prev.link() if page.prev else None,
                "next": page.next.link() if page.next else None,
            },
        },
    }


def write_page(html_exporter, page: Page, out: Path, series_title: str) -> str:
    """Write the page, its figures and the notebook's copy; fill in the page's sections and
    description; return the code highlighting's style sheet."""
    import nbformat

    nb = nbformat.read(page.source, as_version=4)
    body, resources = html_exporter.from_notebook_node(
        nb, resources=page_resources(page, series_title)
    )
    for name, data in resources.get("outputs", {}).items():
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    (out / page.href).write_text(body, encoding="utf-8")
    shutil.copy2(page.source, out / page.notebook_href)
    page.sections = [
        {"anchor": anchor, "title": title.strip()} for anchor, title in SECTION.findall(body)
    ]
    page.description_html = markdown_html(page.description_md)
    return "\n".join(resources.get("inlining", {}).get("css", []))


def series_intro(readme: Path):
    """The series' title (escaped) and its first paragraph, from the README."""
    if not readme.is_file():
        return "Notebooks", ""
    title, intro_md = first_heading_and_paragraph([readme.read_text(encoding="utf-8")], readme.name)
    return html.escape(title, quote=False), intro_md


def write_index(out: Path, pages: List[Page], readme: Path, mathjax_version: str) -> None:
    import jinja2

    series_title, intro_md = series_intro(readme)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=False)
    index = env.get_template("site_index.html.j2").render(
        series_title=series_title,
        intro_html=markdown_html(intro_md) if intro_md else "",
        pages=pages,
        mathjax_version=mathjax_version,
    )
    (out / "index.html").write_text(index, encoding="utf-8")


def build(out: Path, notebook_dir: Path, readme: Path = ROOT / "README.md") -> List[Path]:
    """Write the site into ``out``; return the HTML pages written (contents page first)."""
    # the arguments first, before the slow imports
    output_folder.check(out, MARKER)
    pages = read_pages(notebook_dir)
    mathjax_files.folder()  # installed, or one line saying how
    # jsonschema (imported by nbformat) compiles IRI grammars when rfc3987_syntax is
    # installed: about 3 s of CPU, for a format the notebook schema never uses. Without the
    # module jsonschema simply skips that format check.
    sys.modules.setdefault("rfc3987_syntax", None)
    html_exporter = exporter()

    output_folder.replace(
        out, MARKER, "written by python -m tools.site.build; replaced on each build"
    )
    static = out / "static"
    mathjax_version = mathjax_files.copy_into(static / "mathjax")
    shutil.copy2(SITE_CSS, static / "site.css")
    (out / "notebooks").mkdir()
    series_title = series_intro(readme)[0]
    styles = [write_page(html_exporter, page, out, series_title) for page in pages]
    (static / "notebook.css").write_text(lab_static_css() + "\n" + styles[0], encoding="utf-8")
    write_index(out, pages, readme, mathjax_version)
    return [out / "index.html"] + [out / page.href for page in pages]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "build" / "site",
        help="folder to write the site into (replaced; default build/site)",
    )
    parser.add_argument(
        "--notebooks",
        type=Path,
        default=ROOT / "notebooks",
        help="folder of the .ipynb files (default notebooks/)",
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        pages = build(args.out, args.notebooks)
    except (ValueError, RuntimeError) as error:
        print(f"site: {error}", file=sys.stderr)
        return 2
    index = pages[0].resolve()
    print(
        f"site: {len(pages)} pages ({len(pages) - 1} notebooks) in {args.out} "
        f"in {time.perf_counter() - start:.1f} s; open {index.as_uri()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
