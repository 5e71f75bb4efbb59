"""The one output-folder routine of the builders (tools/output_folder.py): a build replaces
its folder only when that is safe, and says in one line naming --out why not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import output_folder
from tools.output_folder import OutputFolderError, check, replace

ROOT = Path(__file__).resolve().parent.parent
MARK = ".test-build"


@pytest.fixture
def repo(tmp_path) -> Path:
    """A stand-in repository with a source folder and a file in it."""
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "notebooks" / "01_a.ipynb").write_text("{}")
    return root


@pytest.mark.parametrize(
    "where, message",
    [
        (lambda repo: Path("/"), "--out: / is the root of the file system"),
        (lambda repo: repo, "holds the repository"),
        (lambda repo: repo.parent, "holds the repository"),
        (lambda repo: repo / "notebooks", "is inside the sources (notebooks/ of the repository)"),
        (lambda repo: repo / "notebooks" / "site", "is inside the sources (notebooks/"),
        (lambda repo: repo / "tools" / ".." / "notebooks", "is inside the sources (notebooks/"),
    ],
)
def test_the_root_the_repository_and_the_sources_are_refused(repo, where, message):
    out = where(repo)
    with pytest.raises(OutputFolderError, match=message.replace("(", r"\(").replace(")", r"\)")):
        replace(out, MARK, "built", root=repo)
    assert (repo / "notebooks" / "01_a.ipynb").read_text() == "{}"


def test_the_real_repository_and_its_sources_are_refused():
    for out in (ROOT, ROOT / "tools", ROOT / "notebooks", ROOT / "transformer_lib" / "x"):
        with pytest.raises(OutputFolderError, match=r"^--out: "):
            check(out, MARK)
    check(ROOT / "build" / "a-new-folder", MARK)  # build/ is where builds go


def test_a_file_and_an_unmarked_folder_are_refused_and_kept(tmp_path):
    file = tmp_path / "file"
    file.write_text("not a folder")
    with pytest.raises(
        OutputFolderError, match=f"--out: {file} is a file, not a folder; give a folder"
    ):
        replace(file, MARK, "built")
    with pytest.raises(
        OutputFolderError,
        match=f"--out: cannot create {file / 'sub'}: {file} is a file, not a folder",
    ):
        replace(file / "sub", MARK, "built")
    folder = tmp_path / "precious"
    folder.mkdir()
    (folder / "keep.txt").write_text("keep me")
    with pytest.raises(
        OutputFolderError,
        match=f"--kit: {folder} is a non-empty folder that "
        f"no earlier build wrote \\(no {MARK} file\\)",
    ):
        replace(folder, MARK, "built", flag="--kit")
    assert file.read_text() == "not a folder" and (folder / "keep.txt").read_text() == "keep me"


def test_a_folder_that_cannot_be_made_is_refused():
    with pytest.raises(
        OutputFolderError,
        match=r"^--out: cannot create /proc/nope "
        r"\(No such file or directory\)",
    ):
        replace(Path("/proc/nope"), MARK, "built")


def test_a_new_an_empty_and_an_earlier_build_folder_are_replaced(tmp_path):
    new = replace(tmp_path / "a" / "b", MARK, "built by a test")
    assert sorted(p.name for p in new.iterdir()) == [MARK]
    assert (new / MARK).read_text() == "built by a test\n"
    (new / "old.html").write_text("from the last build")
    replace(new, MARK, "again")
    assert sorted(p.name for p in new.iterdir()) == [MARK]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert replace(empty, MARK, "built") == empty and (empty / MARK).is_file()


def test_the_sources_listed_exist_in_the_repository():
    """A renamed source folder must not silently fall out of the protected list."""
    missing = [
        name
        for name in output_folder.SOURCES
        if name not in (".venv", ".git") and not (ROOT / name).is_dir()
    ]
    assert missing == []
