"""Greedy decoding and beam search: cache == no cache, beam 1 == greedy, exact search at a
large beam, EOS handling, batched == per item, bad input."""

import itertools

import pytest
import torch
from torch import nn

from transformer_lib import Transformer, TransformerConfig
from transformer_lib.search import beam_search, gnmt_length_penalty, greedy_decode

PAD, BOS, EOS = 0, 1, 2


def random_model(seed, tgt_vocab=12, **overrides):
    """Untied embeddings: a random tied model mostly repeats its input token."""
    torch.manual_seed(seed)
    config = TransformerConfig.tiny(
        src_vocab_size=20, tgt_vocab_size=tgt_vocab, P_drop=0.0, **overrides
    )
    return Transformer(config)


def padded_src(seed, B=6, S=7):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 20, (B, S), generator=g)
    src[1, 4:] = PAD
    src[B - 1, 1:] = PAD
    return src


def model_score(model, src, ys, alpha):
    """log P(ys | src) / lp(|ys|) by teacher forcing, counting tokens up to EOS (inclusive).
    Padding is never produced, so it is excluded from the softmax as the decoders do."""
    tgt_in = torch.cat((torch.full((ys.shape[0], 1), BOS), ys[:, :-1]), dim=1)
    with torch.no_grad():
        logits = model.eval()(src, tgt_in)  # (B, T, V)
    logits[..., PAD] = float("-inf")
    log_probs = logits.log_softmax(-1).gather(2, ys[..., None])[..., 0]  # (B, T)
    real = ys != PAD
    return log_probs.masked_fill(~real, 0.0).sum(1) / gnmt_length_penalty(real.sum(1), alpha)


def assert_eos_format(out, max_len, eos=EOS):
    """After the first EOS only padding; no padding before it; no EOS -> max_len tokens."""
    for row in out:
        hits = (row == eos).nonzero()
        end = int(hits[0]) + 1 if hits.numel() else len(row)
        assert not (row[:end] == PAD).any()
        assert (row[end:] == PAD).all()
        if not hits.numel():
            assert len(row) == max_len


@pytest.mark.parametrize("seed", range(5))
def test_cache_gives_the_same_tokens_as_recomputing_the_prefix(seed):
    model, src = random_model(seed), padded_src(seed)
    for eos in (EOS, 4):
        cached = greedy_decode(model, src, 15, eos_id=eos)
        full = greedy_decode(model, src, 15, eos_id=eos, use_cache=False)
        assert torch.equal(cached, full)


def test_cached_path_feeds_one_token_per_step():
    model, src = random_model(0), padded_src(0)
    seen = []
    decode = model.decode
    model.decode = lambda tgt, *a, **k: seen.append((tgt.shape[1], k["cache"])) or decode(
        tgt, *a, **k
    )
    greedy_decode(model, src, 6, eos_id=11)
    assert [t for t, _ in seen] == [1] * len(seen) and seen[0][1] is not None
    seen.clear()
    greedy_decode(model, src, 6, eos_id=11, use_cache=False)
    assert [t for t, _ in seen] == list(range(1, len(seen) + 1))


@pytest.mark.parametrize("seed", range(3))
def test_beam_cache_follows_each_hypothesis_parent(seed):
    model, src = random_model(seed), padded_src(seed)
    for k in (2, 4):
        assert torch.equal(
            beam_search(model, src, 12, beam_size=k),
            beam_search(model, src, 12, beam_size=k, use_cache=False),
        )


@pytest.mark.parametrize("seed", range(4))
def test_beam_of_one_is_greedy(seed):
    model, src = random_model(seed), padded_src(seed)
    for eos in (EOS, 4):
        assert torch.equal(
            beam_search(model, src, 12, beam_size=1, eos_id=eos),
            greedy_decode(model, src, 12, eos_id=eos),
        )


def all_hypotheses(vocab, max_len):
    """Every output the decoders can produce: EOS-terminated or max_len long, no padding."""
    words = [t for t in range(vocab) if t != PAD]
    for n in range(1, max_len + 1):
        for seq in itertools.product(words, repeat=n):
            if EOS not in seq[:-1] and (seq[-1] == EOS or n == max_len):
                yield list(seq) + [PAD] * (max_len - n)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.5])
def test_a_beam_that_prunes_nothing_finds_the_best_sequence_and_beats_greedy(alpha):
    # 5 tokens that may be produced, 3 steps: 125 hypotheses at most, so a beam of 125
    # never prunes and must find the exact optimum of log P / lp. (A small beam usually,
    # but not always, beats greedy: beam search can prune greedy's prefix early.)
    model, src, max_len = random_model(1, tgt_vocab=6), padded_src(1, B=3), 3
    best = beam_search(model, src, max_len, beam_size=125, length_penalty=alpha)
    best = nn.functional.pad(best, (0, max_len - best.shape[1]), value=PAD)
    candidates = torch.tensor(list(all_hypotheses(6, max_len)))  # (N, max_len)
    for b in range(src.shape[0]):
        scores = model_score(model, src[b : b + 1].expand(len(candidates), -1), candidates, alpha)
        got = model_score(model, src[b : b + 1], best[b : b + 1], alpha)
        torch.testing.assert_close(got, scores.max()[None])
        greedy = greedy_decode(model, src[b : b + 1], max_len)
        assert got >= model_score(model, src[b : b + 1], greedy, alpha) - 1e-6


def test_beam_returns_its_best_ranked_hypothesis_and_scores_above_greedy_here():
    # Fixed seeds where the property holds; the exact-search test above is the guarantee.
    for seed in range(3):
        model, src = random_model(seed), padded_src(seed)
        beam = beam_search(model, src, 12, beam_size=4)
        greedy = greedy_decode(model, src, 12)
        assert (
            model_score(model, src, beam, 0.6) >= model_score(model, src, greedy, 0.6) - 1e-5
        ).all()


def where_it_stops(row, eos):
    hits = (row == eos).nonzero()
    if not hits.numel():
        return "none"
    return "first" if int(hits[0]) == 0 else "later"


def test_after_eos_only_padding():
    stops = set()
    for seed, eos in itertools.product(range(5), (EOS, 4)):
        model, src = random_model(seed), padded_src(seed)
        for out in (
            greedy_decode(model, src, 12, eos_id=eos),
            beam_search(model, src, 12, beam_size=3, eos_id=eos),
        ):
            assert_eos_format(out, 12, eos)
            stops |= {where_it_stops(row, eos) for row in out}
    assert stops == {"first", "later", "none"}  # the cases above were all exercised


def eos_rigged_model():
    model = random_model(0)
    D, V = model.config.d_model, model.config.tgt_vocab_size
    model.generator = nn.Linear(D, V)
    nn.init.zeros_(model.generator.weight)
    with torch.no_grad():
        model.generator.bias.copy_(torch.arange(V) * 0.1)
        model.generator.bias[EOS] = 10.0
    return model


def test_a_model_that_prefers_eos_stops_at_once():
    model, src = eos_rigged_model(), padded_src(0)
    expected = torch.full((src.shape[0], 1), EOS)
    assert torch.equal(greedy_decode(model, src, 20), expected)
    assert torch.equal(greedy_decode(model, src, 20, use_cache=False), expected)
    for k in (1, 2, 5):
        assert torch.equal(beam_search(model, src, 20, beam_size=k), expected)


@pytest.mark.parametrize("seed", range(3))
def test_batched_beam_equals_beam_per_item(seed):
    model, src = random_model(seed), padded_src(seed)
    batched = beam_search(model, src, 12, beam_size=3)
    for b in range(src.shape[0]):
        item = src[b : b + 1, : int((src[b] != PAD).sum())]  # no padding
        alone = beam_search(model, item, 12, beam_size=3)[0]
        assert torch.equal(batched[b, : len(alone)], alone)
        assert (batched[b, len(alone) :] == PAD).all()


def test_decoding_restores_training_mode_and_tracks_no_gradients():
    model, src = random_model(0), padded_src(0)
    model.train()
    out = greedy_decode(model, src, 5)
    assert model.training and not out.requires_grad
    model.eval()
    beam_search(model, src, 5, beam_size=2)
    assert not model.training


def test_length_penalty_formula():
    lengths = torch.tensor([1, 4, 10])
    torch.testing.assert_close(
        gnmt_length_penalty(lengths, 0.6), ((5 + lengths.float()) / 6) ** 0.6
    )
    assert gnmt_length_penalty(torch.tensor([1]), 0.6).item() == 1.0  # lp(1) = 1


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(max_len=0), ValueError, "max_len must be at least 1, got 0"),
        (dict(max_len=2.5), TypeError, r"max_len must be an integer, got 2.5 \(float\)"),
        (dict(max_len=1000), ValueError, r"max_len must be <= the model's positional table"),
        (dict(beam_size=0), ValueError, "beam_size must be at least 1, got 0"),
        (dict(beam_size=True), TypeError, r"beam_size must be an integer, got True \(bool\)"),
        (
            dict(length_penalty=-1.0),
            ValueError,
            r"length_penalty must be in \[0.0, inf\], got -1.0",
        ),
        (dict(eos_id=12), ValueError, "eos_id must be at most 11, got 12"),
        (dict(bos_id=-1), ValueError, "bos_id must be at least 0, got -1"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    model, src = random_model(0), padded_src(0)
    args = {"max_len": 5, **kwargs}
    with pytest.raises(error, match=match):
        beam_search(model, src, **args)
    if "beam_size" not in kwargs and "length_penalty" not in kwargs:
        with pytest.raises(error, match=match):
            greedy_decode(model, src, **args)


def test_bad_source_is_named():
    model = random_model(0)
    for decode in (greedy_decode, beam_search):
        with pytest.raises(ValueError, match="src"):
            decode(model, torch.tensor([3, 4, 5]), 5)  # 1-D
        with pytest.raises(TypeError, match="src"):
            decode(model, torch.rand(2, 5), 5)  # float
        with pytest.raises(ValueError, match="src"):
            decode(model, torch.tensor([[3, 99]]), 5)  # out of vocab
        with pytest.raises(TypeError, match="model"):
            decode("model", torch.tensor([[3, 4]]), 5)


@pytest.mark.parametrize("decode", [greedy_decode, beam_search], ids=["greedy", "beam"])
def test_an_empty_batch_is_named(decode):
    model = Transformer(TransformerConfig.tiny(src_vocab_size=20, P_drop=0.0))
    with pytest.raises(ValueError, match=r"src must hold at least one sequence .*\(0, 5\)"):
        decode(model, torch.zeros(0, 5, dtype=torch.long), max_len=4)
