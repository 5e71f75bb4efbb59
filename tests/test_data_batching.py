"""Batching: each example once, right padding, shifted targets, token budget, determinism."""

import random

import pytest
import torch

from transformer_lib.data import CharTokenizer, make_date_splits
from transformer_lib.data import example_checks
from transformer_lib.data.batching import Batch, encode_pairs, make_batch, token_batches

PAD, BOS, EOS = 0, 1, 2


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
    n = len(row)
    while n and row[n - 1] == PAD:
        n -= 1
    assert PAD not in row[:n], "padding inside a row"
    return row[:n]


def test_every_example_exactly_once_and_rows_rebuild_it():
    examples = random_examples()
    batches = token_batches(examples, max_tokens=120, shuffle=True, seed=1)
    seen = sorted(i for b in batches for i in b.indices)
    assert seen == list(range(len(examples)))
    for b in batches:
        for row, i in enumerate(b.indices):
            src, tgt = examples[i]
            assert unpad(b.src[row]) == src
            assert unpad(b.tgt_in[row]) == [BOS] + tgt
            assert unpad(b.tgt_out[row]) == tgt + [EOS]


def test_each_example_is_checked_once_and_batched_as_make_batch_would(monkeypatch):
    # a training run cuts every epoch into batches: the checks run once per example, not
    # once more per batch and per padded row
    calls = []
    checked = example_checks.id_list

    def counted(ids, name):
        calls.append(name)
        return checked(ids, name)

    monkeypatch.setattr(example_checks, "id_list", counted)
    examples = [(torch.tensor(s), tuple(t)) for s, t in random_examples(100)]  # any id sequence
    batches = token_batches(examples, max_tokens=120, seed=3)
    assert len(calls) == 2 * len(examples)
    monkeypatch.undo()
    for b in batches:
        again = make_batch(examples, b.indices)
        assert torch.equal(b.src, again.src) and torch.equal(b.tgt_in, again.tgt_in)
        assert torch.equal(b.tgt_out, again.tgt_out) and b.n_tokens == again.n_tokens


def test_shapes_dtype_shift_and_token_count():
    batches = token_batches(random_examples(), max_tokens=200, seed=0)
    for b in batches:
        assert isinstance(b, Batch) and b.src.dtype == b.tgt_in.dtype == torch.long
        assert b.tgt_in.shape == b.tgt_out.shape and b.src.shape[0] == b.tgt_in.shape[0] == len(b)
        assert (b.tgt_in[:, 0] == BOS).all()
        real = b.tgt_in != PAD
        # tgt_out is tgt_in shifted left by one, with EOS at the end of each row
        assert torch.equal(b.tgt_out[:, :-1][real[:, 1:]], b.tgt_in[:, 1:][real[:, 1:]])
        assert b.n_tokens == int((b.tgt_out != PAD).sum()) == int(real.sum())
        assert int((b.tgt_out == EOS).sum()) == len(b)
        # each batch is cut to its own longest row: no all-pad column
        assert (b.src[:, -1] != PAD).any() and (b.tgt_out[:, -1] != PAD).any()


@pytest.mark.parametrize("max_tokens", [26, 64, 500])
def test_tokens_per_batch_bounded(max_tokens):
    batches = token_batches(random_examples(), max_tokens=max_tokens, seed=0)
    for b in batches:
        assert b.src.numel() <= max_tokens and b.tgt_in.numel() <= max_tokens
    assert sum(len(b) for b in batches) == 300


def test_length_grouping_keeps_padding_small():
    examples = random_examples(1000)
    batches = token_batches(examples, max_tokens=300, seed=0)
    pad_fraction = sum(int((b.src == PAD).sum()) for b in batches) / sum(
        b.src.numel() for b in batches
    )
    rng = random.Random(0)
    mixed = examples[:]
    rng.shuffle(mixed)
    width = max(len(s) for s, _ in mixed[:20])
    assert pad_fraction < 0.1 < 1 - sum(len(s) for s, _ in mixed[:20]) / (20 * width)


def test_determinism_by_seed():
    examples = random_examples()

    def order(**kw):
        return [b.indices for b in token_batches(examples, max_tokens=100, **kw)]

    assert order(seed=3) == order(seed=3)
    assert order(seed=3) != order(seed=4)
    assert order(shuffle=False, seed=3) == order(shuffle=False, seed=4)
    a, b = token_batches(examples, 100, seed=5), token_batches(examples, 100, seed=5)
    assert all(
        torch.equal(x.src, y.src) and torch.equal(x.tgt_out, y.tgt_out) for x, y in zip(a, b)
    )


def test_pad_id_and_to_device():
    batch = token_batches([([5, 6], [7]), ([5], [7, 8, 9])], 100, shuffle=False, pad_id=9)[0]
    assert batch.src.tolist() == [[5, 9], [5, 6]]
    moved = batch.to("cpu")
    assert torch.equal(moved.tgt_out, batch.tgt_out) and moved.n_tokens == batch.n_tokens == 6


def test_encode_pairs_with_dates_and_max_len():
    pairs = make_date_splits(200, 0, 0, seed=0)["train"]
    src_tok = CharTokenizer.train(s for s, _ in pairs)
    tgt_tok = CharTokenizer.train(t for _, t in pairs)
    examples = encode_pairs(pairs, src_tok, tgt_tok)
    assert len(examples) == len(pairs)
    for (s, t), (src, tgt) in zip(pairs, examples):
        assert src_tok.decode(src) == s and tgt_tok.decode(tgt) == t and len(tgt) == 10
    short = encode_pairs(pairs, src_tok, tgt_tok, max_len=12)
    assert short == [e for e in examples if len(e[0]) <= 12]
    assert 0 < len(short) < len(examples)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="max_tokens"):
        token_batches(random_examples(), max_tokens=0)
    with pytest.raises(ValueError, match="max_tokens"):
        token_batches([([4] * 50, [4])], max_tokens=10)
    with pytest.raises(TypeError, match=r"examples\[1\]"):
        token_batches([([4], [4]), [4]], max_tokens=10)
    with pytest.raises(ValueError, match=r"examples\[0\]"):
        token_batches([([], [4])], max_tokens=10)
    with pytest.raises(TypeError, match="seed"):
        token_batches([([4], [4])], max_tokens=10, seed="a")
    with pytest.raises(ValueError, match="max_len"):
        encode_pairs(
            [("a", "b")], CharTokenizer.train(["ab"]), CharTokenizer.train(["ab"]), max_len=1
        )
    assert token_batches([], max_tokens=10) == []


def test_id_lists_of_every_kind_come_back_as_new_lists_of_plain_ints():
    import numpy as np

    plain = [3, 0, 7]
    out = example_checks.id_list(plain, "ids")
    assert out == plain and out is not plain  # a copy: batching never aliases the caller's
    for ids in ((3, 0, 7), torch.tensor([3, 0, 7]), np.array([3, 0, 7]), [3, np.int64(0), 7]):
        out = example_checks.id_list(ids, "ids")
        assert out == plain and all(type(i) is int for i in out), ids
    for bad, error, text in (
        ([3, -1], ValueError, "got -1"),
        ([3, True], TypeError, r"got True \(bool\)"),
        ([3, 1.0], TypeError, r"got 1.0 \(float\)"),
    ):
        with pytest.raises(error, match=text):
            example_checks.id_list(bad, "ids")
