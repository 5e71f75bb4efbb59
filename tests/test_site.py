"""The offline static site of the series (``bash dev.sh site``, ``python -m tools.site.build``).

The site is built once per test session into a temporary folder, by the same command line
``dev.sh site`` runs. Then: every file it refers to is inside the folder and exists; every
page opens in headless Chromium with no failed request and no request leaving ``file://``,
its math typeset by the local MathJax; screenshots of the contents page and of one notebook
page go to build/test-artifacts/.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from browser import RequestLog, open_browser, screenshot_path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))


def run_build(out: Path, notebooks: Path = ROOT / "notebooks"):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.site.build",
            "--out",
            str(out),
            "--notebooks",
            str(notebooks),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    result = run_build(out)
    assert result.returncode == 0, result.stderr
    return out


# ---------------------------------------------------------------- what the folder holds


class References(HTMLParser):
    """Every URL an HTML file refers to: (tag, attribute, url), inline style url()s too."""

    URL_ATTRS = {"src", "href", "srcset", "poster", "data", "action", "xlink:href"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.refs = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is None:
                continue
            if name in self.URL_ATTRS:
                urls = (
                    [part.split()[0] for part in value.split(",")] if name == "srcset" else [value]
                )
                self.refs += [(tag, name, url.strip()) for url in urls if url.strip()]
            elif name == "style":
                self.refs += [(tag, "style", url) for url in css_urls(value)]
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.refs += [("style", "url()", url) for url in css_urls(data)]


def css_urls(css: str):
    found = [m.strip().strip("'\"") for m in re.findall(r"url\(([^)]*)\)", css)]
    found += re.findall(r"@import\s+['\"]([^'\"]+)['\"]", css)
    return found


def html_refs(path: Path):
    parser = References()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.refs


def check_local(site: Path, source: Path, tag: str, url: str) -> str:
    """'' if ``url`` (found in ``source``) is fine, else what is wrong with it."""
    scheme = urlsplit(url).scheme.lower()
    if url.startswith("#") or scheme in ("data", "about"):
        return ""
    if scheme in ("http", "https") and tag == "a":
        return ""  # a hyperlink the reader may follow (a citation); nothing loads it
    if scheme or url.startswith("//"):
        return f"{url!r} leaves the site ({tag} in {source.name})"
    target = (source.parent / unquote(urlsplit(url).path)).resolve()
    if site.resolve() not in target.parents:
        return f"{url!r} points outside the site folder ({tag} in {source.name})"
    if not target.is_file():
        return f"{url!r} does not exist ({tag} in {source.name})"
    return ""


def test_site_has_a_page_per_notebook_and_the_notebooks(site):
    pages = sorted(p.stem for p in site.glob("*.html"))
    assert pages == sorted(NOTEBOOKS + ["index"])
    for stem in NOTEBOOKS:
        copy = site / "notebooks" / f"{stem}.ipynb"
        assert copy.read_bytes() == (ROOT / "notebooks" / f"{stem}.ipynb").read_bytes()


def test_no_page_refers_outside_the_folder_and_every_reference_exists(site):
    files = sorted(site.rglob("*.html")) + sorted(site.rglob("*.css"))
    assert len(files) >= len(NOTEBOOKS) + 2
    problems, local = [], 0
    for path in files:
        refs = (
            html_refs(path)
            if path.suffix == ".html"
            else [("css", "url()", u) for u in css_urls(path.read_text(encoding="utf-8"))]
        )
        for tag, _attr, url in refs:
            problem = check_local(site, path, tag, url)
            problems += [problem] if problem else []
            local += not problem and not url.startswith(("#", "data:", "http"))
    assert not problems, "\n".join(problems)
    # the check saw the real references: figures, scripts, stylesheets, notebook links
    assert local >= 5 * len(NOTEBOOKS)


def test_every_figure_of_the_notebooks_is_on_its_page(site):
    for stem in NOTEBOOKS:
        nb = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))
        figures = sum(
            1
            for cell in nb["cells"]
            for out in cell.get("outputs", [])
            if {"image/png", "image/svg+xml"} & set(out.get("data", {}))
        )
        images = [url for tag, _a, url in html_refs(site / f"{stem}.html") if tag == "img"]
        assert len(images) == figures, stem


def test_navigation_links_run_through_the_series_in_order(site):
    for i, stem in enumerate(NOTEBOOKS):
        refs = {(tag, url) for tag, _a, url in html_refs(site / f"{stem}.html")}
        assert ("a", "index.html") in refs
        assert ("a", f"notebooks/{stem}.ipynb") in refs
        if i > 0:
            assert ("a", f"{NOTEBOOKS[i - 1]}.html") in refs
        if i + 1 < len(NOTEBOOKS):
            assert ("a", f"{NOTEBOOKS[i + 1]}.html") in refs
    index = [url for tag, _a, url in html_refs(site / "index.html") if tag == "a"]
    firsts = [index.index(f"{stem}.html") for stem in NOTEBOOKS]
    assert firsts == sorted(firsts)


def test_titles_and_descriptions_come_from_the_notebooks(tmp_path):
    """A notebook added later (an appendix) gets its page and its entry in the contents."""
    folder = tmp_path / "nbs"
    folder.mkdir()
    cells = [
        {
            "cell_type": "markdown",
            "metadata": {},
            "source": "# A · An appendix\n\nThis appendix derives $e^{i\\pi} = -1$ in passing.\n\n"
            "## 1. First section\n\nText.",
        },
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": 1,
            "source": "1 + 1",
            "outputs": [
                {
                    "output_type": "execute_result",
                    "execution_count": 1,
                    "metadata": {},
                    "data": {"text/plain": "2"},
                }
            ],
        },
    ]
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    for name in ("01_first.ipynb", "99_appendix.ipynb"):
        (folder / name).write_text(json.dumps(nb), encoding="utf-8")
    result = run_build(tmp_path / "site", folder)
    assert result.returncode == 0, result.stderr
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert index.count("A · An appendix") == 2
    assert "This appendix derives $e^{i\\pi} = -1$ in passing." in index
    assert 'href="99_appendix.html#1.-First-section"' in index
    page = (tmp_path / "site" / "99_appendix.html").read_text(encoding="utf-8")
    assert 'href="01_first.html"' in page and "99_appendix.ipynb" in page


def test_bad_input_is_refused_with_a_clear_message(tmp_path):
    result = run_build(tmp_path / "site", tmp_path)
    assert result.returncode == 2 and "--notebooks: no *.ipynb file" in result.stderr
    (tmp_path / "keep.txt").write_text("not a site")
    result = run_build(tmp_path, ROOT / "notebooks")
    assert result.returncode == 2 and "--out" in result.stderr
    assert (tmp_path / "keep.txt").is_file()
    result = run_build(ROOT / "notebooks", ROOT / "notebooks")  # the course kit's routine
    assert result.returncode == 2 and result.stderr.startswith(
        f"site: --out: {ROOT / 'notebooks'} is inside the sources (notebooks/ of the repository)"
    )
    folder = tmp_path / "nbs"
    folder.mkdir()
    nb = {
        "cells": [{"cell_type": "markdown", "metadata": {}, "source": "no heading"}],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (folder / "x.ipynb").write_text(json.dumps(nb))
    result = run_build(tmp_path / "site2", folder)
    assert result.returncode == 2 and "x.ipynb: no Markdown heading" in result.stderr


# ---------------------------------------------------------------- in the browser

VISIBLE_TEXT_OUTSIDE_CODE = """() => {
    const copy = document.body.cloneNode(true);
    copy.querySelectorAll('pre, code, script, style, mjx-container, .jp-OutputArea')
        .forEach(e => e.remove());
    return copy.textContent;
}"""


# the contents page and one notebook page, as a reader first sees them
SCREENSHOTS = {"index": "site-index.png", NOTEBOOKS[0]: "site-notebook.png"}


@pytest.fixture(scope="module")
def browser():
    with open_browser() as context:
        yield context


def open_page(browser, path: Path):
    page = browser.new_page()
    log = RequestLog(page)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_selector("html[data-math=typeset]", state="attached", timeout=60_000)
    return page, log, errors


def notebook_markdown(name: str) -> str:
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    return "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def notebook_has_figures(name: str) -> bool:
    return "image/png" in (ROOT / "notebooks" / f"{name}.ipynb").read_text()


@pytest.mark.parametrize("name", ["index"] + NOTEBOOKS)
def test_page_loads_offline_with_its_math_typeset(site, browser, name):
    page, log, errors = open_page(browser, site / f"{name}.html")
    try:
        assert log.requests, "the request log saw nothing"
        assert not log.outside, log.outside
        assert not log.failed, log.failed
        assert not errors, errors
        if name == "index" or "$" in notebook_markdown(name):
            assert page.locator("mjx-container svg").count() > 0
        assert page.locator('[data-mml-node="merror"]').count() == 0
        text = page.evaluate(VISIBLE_TEXT_OUTSIDE_CODE)
        assert "\\(" not in text and "\\[" not in text
        raw = re.findall(r"\$[^$\s][^$]*\$", text)
        assert not raw, raw[:3]
        if name in SCREENSHOTS:
            path = screenshot_path(SCREENSHOTS[name])
            path.unlink(missing_ok=True)
            page.screenshot(path=str(path))
            assert path.stat().st_size > 10_000
        if name != "index":
            # figures are drawn at a size, not overflowing the column
            widths = page.evaluate("""() => Array.from(document.images).map(i =>
                [i.naturalWidth, i.getBoundingClientRect().width,
                 i.closest('main').getBoundingClientRect().width])""")
            assert widths or not notebook_has_figures(name)
            assert all(natural > 0 and shown <= column + 1 for natural, shown, column in widths), (
                widths
            )
    finally:
        page.close()
