"""Bad inputs to the data modules (tokenizers, batching, dates, corpus files): one TypeError or
ValueError that names the argument, what was given and what was expected."""

import time
import warnings

import pytest
import torch

from transformer_lib.data import tokenizers as tok_mod
from transformer_lib.data.batching import (
    encode_fitting,
    encode_pairs,
    make_batch,
    pad_rows,
    token_batches,
)
from transformer_lib.data.dates import make_date_splits
from transformer_lib.data.tokenizers import BPETokenizer, CharTokenizer, tokenizer_from_dict

CHAR = CharTokenizer.train(["abc"])  # ids 0-3 specials, 4-6 'a' 'b' 'c'
EXAMPLES = [([4, 5], [6]), ([7], [8, 9])]


@pytest.fixture(scope="module")
def bpe():
    return BPETokenizer.train(["hello world", "hello there", "world peace"], vocab_size=40)


# tokenizers ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: CHAR.id_to_token(100), ValueError, r"^i must be at most 6, got 100$"),
        (lambda: CHAR.id_to_token(-1), ValueError, r"^i must be at least 0, got -1$"),
        (lambda: CHAR.id_to_token(True), TypeError, r"^i must be an integer, got True \(bool\)$"),
        (lambda: CHAR.id_to_token("4"), TypeError, r"^i must be an integer, got '4' \(str\)$"),
        (lambda: CharTokenizer(["a", "bc"]), ValueError, r"single-character strings, got 'bc'"),
        (lambda: CharTokenizer(["a", "a"]), ValueError, r"must not repeat a character, got 'a'"),
        (
            lambda: BPETokenizer.train(["a b"], 50, min_frequency=-1),
            ValueError,
            r"^min_frequency must be at least 0, got -1$",
        ),
        (
            lambda: BPETokenizer.train(["a b"], 50, min_frequency="2"),
            TypeError,
            r"^min_frequency must be an integer, got '2' \(str\)$",
        ),
        (
            lambda: BPETokenizer.train(["a b"], 4),
            ValueError,
            r"^vocab_size must be at least 5, got 4$",
        ),
        (lambda: BPETokenizer.train(["a b"], 50.0), TypeError, r"^vocab_size must be an integer"),
        (
            lambda: tokenizer_from_dict({"kind": "char"}),
            ValueError,
            r"d is a 'char' tokenizer without its 'chars' key \(keys: \['kind'\]\)",
        ),
        (
            lambda: tokenizer_from_dict({"kind": "bpe"}),
            ValueError,
            r"d is a 'bpe' tokenizer without its 'json' key",
        ),
        (
            lambda: tokenizer_from_dict({"chars": ["a"]}),
            TypeError,
            r"d must be a dict made by a tokenizer's to_dict\(\), with a 'kind' key, got dict with "
            r"keys \['chars'\]",
        ),
        (lambda: tokenizer_from_dict("char"), TypeError, r"with a 'kind' key, got str"),
        (
            lambda: tokenizer_from_dict({"kind": "word"}),
            ValueError,
            r"d\['kind'\] must be 'char' or 'bpe', got 'word'",
        ),
        (
            lambda: tokenizer_from_dict({"kind": "char", "chars": "abc"}),
            TypeError,
            r"d\['chars'\] must be a list of characters, got str",
        ),
        (
            lambda: tokenizer_from_dict({"kind": "bpe", "json": "{not json"}),
            ValueError,
            r"^d\['json'\] is not valid JSON: Expecting property name",
        ),
        (
            lambda: tokenizer_from_dict({"kind": "bpe", "json": "{}"}),
            ValueError,
            r"^d\['json'\] is not a tokenizer's JSON: ",
        ),
        (
            lambda: tokenizer_from_dict({"kind": "bpe", "json": None}),
            TypeError,
            r"d\['json'\] must be a str of the tokenizer's JSON, got NoneType",
        ),
    ],
    ids=lambda v: "" if callable(v) or isinstance(v, type) else v[:40],
)
def test_tokenizer_bad_input_is_named(call, error, match):
    with pytest.raises(error, match=match) as info:
        call()
    assert "\n" not in str(info.value)


def test_bpe_id_to_token_out_of_range_is_named(bpe):
    with pytest.raises(ValueError, match=rf"^i must be at most {bpe.vocab_size - 1}, got 1000$"):
        bpe.id_to_token(1000)
    assert bpe.id_to_token(4) == bpe.hf.id_to_token(4)  # in range: unchanged


def test_bpe_on_a_huge_word_is_cut_with_a_note_and_fast(monkeypatch):
    monkeypatch.setattr(tok_mod, "MAX_WORD", 1000)  # the same rule on a smaller line
    line = "abcdefghij" * 1000  # 10,000 characters, no space
    start = time.perf_counter()
    with pytest.warns(
        UserWarning,
        match=r"texts hold 1 word\(s\) longer than 1,000 characters "
        r"\(the longest: 10,000, in texts\[1\]\): cut into 1,000-character pieces",
    ):
        tok = BPETokenizer.train(["a short line", line], vocab_size=60)
    assert time.perf_counter() - start < 5
    assert tok.decode(tok.encode(line)) == line  # encoding is not affected


def test_bpe_on_ordinary_words_says_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        BPETokenizer.train(["hello world"] * 3, vocab_size=30)


def test_long_bpe_training_says_what_it_does(monkeypatch, capfd):
    monkeypatch.setattr(tok_mod, "LONG_TRAINING", 100)
    BPETokenizer.train(["hello world, hello there"] * 10, vocab_size=30)
    err = capfd.readouterr().err
    assert "training BPE: 30 tokens from 10 texts (240 characters); this can take minutes" in err


# batching -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda: make_batch(EXAMPLES, []),
            ValueError,
            r"^indices is empty: a batch needs at least one example$",
        ),
        (lambda: make_batch(EXAMPLES, [5]), ValueError, r"^indices\[0\] must be at most 1, got 5$"),
        (
            lambda: make_batch(EXAMPLES, ["0"]),
            TypeError,
            r"^indices\[0\] must be an integer, got '0'",
        ),
        (lambda: make_batch(EXAMPLES, 0), TypeError, r"^indices must be a list of positions"),
        (
            lambda: make_batch(None, [0]),
            TypeError,
            r"^examples must be a list of \(src_ids, tgt_ids\) pairs, got NoneType$",
        ),
        (
            lambda: make_batch([("ab", "c")], [0]),
            TypeError,
            r"^examples\[0\]\[0\] must be a list of token ids \(int\), got str 'ab'$",
        ),
        (
            lambda: make_batch([([1.5], [2])], [0]),
            TypeError,
            r"^examples\[0\]\[0\] must hold token ids \(int >= 0\), got 1.5 \(float\)$",
        ),
        (
            lambda: make_batch([([4], [4]), 5], [1]),
            TypeError,
            r"^examples\[1\] must be a \(src_ids, tgt_ids\) pair, got 5$",
        ),
        (
            lambda: make_batch(EXAMPLES, [0], pad_id=None),
            TypeError,
            r"^pad_id must be an integer, got None",
        ),
        (lambda: make_batch(EXAMPLES, [0], eos_id=-2), ValueError, r"^eos_id must be at least 0"),
        (
            lambda: token_batches(None, 10),
            TypeError,
            r"^examples must be a list of \(src_ids, tgt_ids\) pairs, got NoneType$",
        ),
        (lambda: token_batches("abc", 10), TypeError, r"^examples must be a list .* got str$"),
        (
            lambda: token_batches([("ab", "c")], 10),
            TypeError,
            r"^examples\[0\]\[0\] must be a list of token ids \(int\), got str",
        ),
        (
            lambda: token_batches([([4], [2.0])], 10),
            TypeError,
            r"^examples\[0\]\[1\] must hold token ids \(int >= 0\), got 2.0 \(float\)$",
        ),
        (
            lambda: token_batches([([-1], [2])], 10),
            ValueError,
            r"^examples\[0\]\[0\] must hold token ids \(int >= 0\), got -1$",
        ),
        (
            lambda: token_batches(EXAMPLES, 10, shuffle="no"),
            TypeError,
            r"^shuffle must be True or False, got 'no' \(str\)$",
        ),
        (
            lambda: token_batches(EXAMPLES, 10, pad_id=None),
            TypeError,
            r"^pad_id must be an integer",
        ),
        (
            lambda: token_batches(EXAMPLES, 10.0),
            TypeError,
            r"^max_tokens must be an integer, got 10.0 \(float\)$",
        ),
        (
            lambda: token_batches(EXAMPLES, True),
            TypeError,
            r"^max_tokens must be an integer, got True",
        ),
        (lambda: token_batches(EXAMPLES, 0), ValueError, r"^max_tokens must be at least 1, got 0$"),
        (lambda: pad_rows([]), ValueError, r"^rows is empty: nothing to pad$"),
        (lambda: pad_rows([[1], "ab"]), TypeError, r"^rows\[1\] must be a list of token ids"),
        (
            lambda: pad_rows(None),
            TypeError,
            r"^rows must be a list of lists of token ids, got None",
        ),
        (
            lambda: encode_pairs([("a", "b")], CHAR, CHAR, max_len=True),
            TypeError,
            r"^max_len must be an integer, got True \(bool\)$",
        ),
        (
            lambda: encode_pairs([("a", "b")], CHAR, CHAR, max_len=1),
            ValueError,
            r"^max_len must be at least 2, got 1$",
        ),
        (
            lambda: encode_pairs([("a", "b"), ("a", 5)], CHAR, CHAR),
            TypeError,
            r"^pairs\[1\] must be a \(source, target\) pair of str, got \('a', 5\)$",
        ),
        (
            lambda: encode_fitting(["ab"], CHAR, CHAR, 8),
            TypeError,
            r"^pairs\[0\] must be a \(source, target\) pair of str, got 'ab'$",
        ),
        (
            lambda: encode_fitting("ab", CHAR, CHAR, 8),
            TypeError,
            r"^pairs must be a list of \(source, target\) pairs of str, got str$",
        ),
    ],
    ids=lambda v: "" if callable(v) or isinstance(v, type) else v[:40],
)
def test_batching_bad_input_is_named(call, error, match):
    with pytest.raises(error, match=match) as info:
        call()
    assert "\n" not in str(info.value)


def test_ids_as_tensors_and_numpy_ints_are_accepted():
    import numpy as np

    batch = token_batches([(torch.tensor([4, 5]), np.array([6]))], 10)[0]
    assert batch.src.tolist() == [[4, 5]] and batch.tgt_out.tolist() == [[6, 2]]


def test_no_examples_give_no_batches():
    """Judged correct as it was: zero examples are zero batches, each example once."""
    assert token_batches([], 10) == []


# dates --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(n_train=-1), ValueError, r"^n_train must be at least 0, got -1$"),
        (dict(n_test=True), TypeError, r"^n_test must be an integer, got True \(bool\)$"),
        (dict(seed=1.5), TypeError, r"^seed must be an integer, got 1.5 \(float\)$"),
        (dict(formats=["nope"]), ValueError, r"got unknown \['nope'\]"),
        (dict(n_valid=40000), ValueError, r"leaves no day for training"),
    ],
)
def test_date_splits_bad_input_is_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        make_date_splits(**kwargs)


def test_id_to_token_takes_a_0d_integer_tensor():
    assert CHAR.id_to_token(torch.tensor(4)) == "a"
    with pytest.raises(TypeError, match=r"^i must be an integer, got 4.0 \(float\)$"):
        CHAR.id_to_token(torch.tensor(4.0))
