"""The date task: determinism, every source denotes its ISO target, disjoint splits, variety."""

import datetime as dt
import os
import re
import subprocess
import sys

import pytest

from transformer_lib.data.dates import (
    CASES,
    DATE_FORMATS,
    DATE_MAX,
    DATE_MIN,
    format_date,
    make_date_splits,
)

# An independent reader of the sources, with its own tables (lower case, abbreviations too).
MONTH_WORDS = {
    1: "january jan janvier janv januar enero ene",
    2: "february feb février févr februar febrero",
    3: "march mar mars märz marzo",
    4: "april apr avril avr abril abr",
    5: "may mai mayo",
    6: "june jun juin juni junio",
    7: "july jul juillet juil juli julio",
    8: "august aug août agosto ago",
    9: "september sep septembre sept septiembre",
    10: "october oct octobre oktober okt octubre",
    11: "november nov novembre noviembre",
    12: "december dec décembre déc dezember dez diciembre dic",
}
MONTH = {w: m for m, words in MONTH_WORDS.items() for w in words.split()}
WEEKDAY_WORDS = [  # Monday = 0
    "monday lundi montag lunes",
    "tuesday mardi dienstag martes",
    "wednesday mercredi mittwoch miércoles",
    "thursday jeudi donnerstag jueves",
    "friday vendredi freitag viernes",
    "saturday samedi samstag sábado",
    "sunday dimanche sonntag domingo",
]
WEEKDAY = {w: i for i, words in enumerate(WEEKDAY_WORDS) for w in words.split()}
FILLERS = {"of", "de", "le", "el", "am", "st", "nd", "rd", "th", "er"}


def year(text):
    y = int(text)
    return y if len(text) == 4 else (1900 + y if y >= 50 else 2000 + y)


def parse(src):
    """Read a source independently of the generator: returns a datetime.date."""
    s = src.lower()
    numeric = [
        (r"(\d{4})-(\d\d)-(\d\d)", "ymd"),
        (r"(\d{4})/(\d\d)/(\d\d)", "ymd"),
        (r"(\d{4})(\d\d)(\d\d)", "ymd"),
        (r"(\d{4})年(\d+)月(\d+)日", "ymd"),
        (r"(\d\d?)/(\d\d?)/(\d\d(?:\d\d)?)", "mdy"),
        (r"(\d\d?)\.(\d\d?)\.(\d\d(?:\d\d)?)", "dmy"),
    ]
    for pattern, order in numeric:
        m = re.fullmatch(pattern, s)
        if m:
            parts = dict(zip(order, m.groups()))
            return dt.date(year(parts["y"]), int(parts["m"]), int(parts["d"]))
    words = re.findall(r"[^\W\d_]+", s)
    numbers = re.findall(r"\d+", s)
    months = [MONTH[w] for w in words if w in MONTH]
    weekdays = [WEEKDAY[w] for w in words if w in WEEKDAY]
    rest = [w for w in words if w not in MONTH and w not in WEEKDAY and w not in FILLERS]
    assert len(months) == 1 and len(numbers) == 2 and not rest, src
    date = dt.date(year(numbers[1]), months[0], int(numbers[0]))
    assert all(w == date.weekday() for w in weekdays), f"wrong weekday in {src!r}"
    return date


def test_splits_are_deterministic_and_sized():
    a = make_date_splits(300, 50, 60, seed=3)
    assert a == make_date_splits(300, 50, 60, seed=3)
    assert a != make_date_splits(300, 50, 60, seed=4)
    assert {k: len(v) for k, v in a.items()} == {"train": 300, "valid": 50, "test": 60}
    # the test set does not depend on how much training data is drawn
    assert make_date_splits(10, 50, 60, seed=3)["test"] == a["test"]


def test_independent_of_python_hash_seed():
    code = (
        "from transformer_lib.data.dates import make_date_splits as m; "
        "print(repr(m(200, 20, 20, seed=1)))"
    )
    outs = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        run = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        outs.add(run.stdout)
    assert len(outs) == 1


def test_every_source_denotes_its_target():
    splits = make_date_splits(3000, 200, 200, seed=0)
    for src, tgt in (p for pairs in splits.values() for p in pairs):
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", tgt)
        assert parse(src).isoformat() == tgt, (src, tgt)
        assert DATE_MIN.isoformat() <= tgt <= DATE_MAX.isoformat()
        assert 0 < len(src) <= 40


@pytest.mark.parametrize("fmt", DATE_FORMATS)
def test_each_format_reads_back_on_edge_dates(fmt):
    edges = [
        DATE_MIN,
        DATE_MAX,
        dt.date(2000, 2, 29),
        dt.date(1999, 12, 31),
        dt.date(2021, 3, 5),
        dt.date(2011, 11, 11),
        dt.date(1968, 9, 23),
    ]
    for d in edges:
        for case in CASES:
            assert parse(format_date(d, fmt, case)) == d, (fmt, case, d)


def test_test_dates_disjoint_from_training():
    splits = make_date_splits(20000, 1000, 1000, seed=0)
    dates = {k: {t for _, t in v} for k, v in splits.items()}
    assert not dates["test"] & dates["train"]
    assert not dates["valid"] & dates["train"]
    assert not dates["valid"] & dates["test"]
    assert len(dates["test"]) == 1000  # one example per held-out date


def test_variety_of_formats_languages_and_case():
    train = [s for s, _ in make_date_splits(5000, 0, 0, seed=0)["train"]]
    text = " ".join(train)
    for word in ["March", "mars", "März", "marzo", "août", "Dezember", "septiembre"]:
        assert re.search(word, text, re.IGNORECASE), word
    assert any(s.isupper() for s in train) and any(s.islower() for s in train)
    assert any(re.fullmatch(r"\d\d/\d\d/\d\d", s) for s in train)
    assert any(re.fullmatch(r"\d+\.\d+\.\d+", s) for s in train)
    shapes = {re.sub(r"[^\W\d_]+", "W", re.sub(r"\d", "9", s)) for s in train}
    assert len(shapes) >= 20  # many distinct layouts
    assert len(set(train)) > 0.95 * len(train)


def test_format_subset_and_bad_input():
    pairs = make_date_splits(50, 0, 0, formats=["iso"])["train"]
    assert all(s == t for s, t in pairs)
    with pytest.raises(TypeError, match="n_train"):
        make_date_splits(n_train=1.5)
    with pytest.raises(ValueError, match="n_test"):
        make_date_splits(n_test=-1)
    with pytest.raises(ValueError, match="formats"):
        make_date_splits(10, 0, 0, formats=["klingon"])
    with pytest.raises(ValueError, match="n_test"):
        make_date_splits(10, 0, 40000)
    with pytest.raises(TypeError, match="date"):
        format_date("2021-03-05", "iso")
    with pytest.raises(ValueError, match="fmt"):
        format_date(dt.date(2021, 3, 5), "nope")
