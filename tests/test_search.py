"""Greedy decoding, beam search and translate(): cached == uncached token for token, beam 1 ==
greedy, exact search at a beam that prunes nothing, EOS handling, batched == per item."""

import itertools

import pytest
import torch
from torch import nn

from transformer_lib.config import TransformerConfig
from transformer_lib.model import Transformer
from transformer_lib.search import (
    Beam,
    beam_search,
    gnmt_length_penalty,
    greedy_decode,
    inference,
    next_log_probs,
    translate,
)
from transformer_lib.tokenizers import CharTokenizer

PAD, BOS, EOS = 0, 1, 2


def random_model(seed, tgt_vocab=12, **overrides):
    """Untied embeddings: a random tied model mostly repeats its input token."""
    torch.manual_seed(seed)
    return Transformer(TransformerConfig.tiny(20, tgt_vocab, P_drop=0.0, **overrides))


def padded_src(seed, B=6, S=7):
    src = torch.randint(3, 20, (B, S), generator=torch.Generator().manual_seed(seed))
    src[1, 4:] = PAD
    src[B - 1, 1:] = PAD
    return src


def model_score(model, src, ys, alpha):
    """log P(ys | src) / lp(|ys|) by teacher forcing, counting tokens up to EOS (inclusive);
    padding is excluded from the softmax as the decoders do."""
    tgt_in = torch.cat((torch.full((ys.shape[0], 1), BOS), ys[:, :-1]), dim=1)
    with torch.no_grad():
        logits = model.eval()(src, tgt_in)  # (B, T, V)
    logits[..., PAD] = float("-inf")
    log_probs = logits.log_softmax(-1).gather(2, ys[..., None])[..., 0]  # (B, T)
    real = ys != PAD
    return log_probs.masked_fill(~real, 0.0).sum(1) / gnmt_length_penalty(real.sum(1), alpha)


@pytest.mark.parametrize("variant", [{}, dict(norm_first=True, positions="learned", d_k=6)])
@pytest.mark.parametrize("seed", range(3))
def test_cached_decoding_gives_the_tokens_of_recomputing_the_prefix(seed, variant):
    model, src = random_model(seed, **variant), padded_src(seed)
    for eos in (EOS, 4):
        cached = greedy_decode(model, src, 15, eos_id=eos)
        assert torch.equal(cached, greedy_decode(model, src, 15, eos_id=eos, use_cache=False))
        for k in (2, 4):
            assert torch.equal(
                beam_search(model, src, 12, beam_size=k, eos_id=eos),
                beam_search(model, src, 12, beam_size=k, eos_id=eos, use_cache=False),
            )


def test_the_cached_path_feeds_one_token_per_step():
    model, src = random_model(0), padded_src(0)
    seen = []
    decode = model.decode
    model.decode = lambda tgt, *a, **k: seen.append(tgt.shape[1]) or decode(tgt, *a, **k)
    greedy_decode(model, src, 6, eos_id=11)
    assert seen == [1] * len(seen)
    seen.clear()
    greedy_decode(model, src, 6, eos_id=11, use_cache=False)
    assert seen == list(range(1, len(seen) + 1))


@pytest.mark.parametrize("seed", range(4))
def test_a_beam_of_one_is_greedy(seed):
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
def test_a_beam_that_prunes_nothing_finds_the_best_sequence(alpha):
    # 5 tokens that may be produced, 3 steps: 125 hypotheses at most, so a beam of 125
    # never prunes and must find the exact optimum of log P / lp.
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


def test_after_eos_only_padding_and_without_eos_max_len_tokens():
    stops = set()
    for seed, eos in itertools.product(range(4), (EOS, 4)):
        model, src = random_model(seed), padded_src(seed)
        for out in (
            greedy_decode(model, src, 12, eos_id=eos),
            beam_search(model, src, 12, 3, eos_id=eos),
        ):
            for row in out:
                hits = (row == eos).nonzero()
                end = int(hits[0]) + 1 if hits.numel() else len(row)
                assert not (row[:end] == PAD).any() and (row[end:] == PAD).all()
                assert hits.numel() or len(row) == 12
                stops.add("none" if not hits.numel() else "first" if end == 1 else "later")
    assert stops == {"first", "later", "none"}  # every case was exercised


def test_a_model_that_prefers_eos_stops_at_once():
    model, src = random_model(0), padded_src(0)
    model.generator = nn.Linear(model.config.d_model, 12)
    nn.init.zeros_(model.generator.weight)
    with torch.no_grad():
        model.generator.bias.copy_(torch.arange(12) * 0.1)
        model.generator.bias[EOS] = 10.0
    expected = torch.full((src.shape[0], 1), EOS)
    assert torch.equal(greedy_decode(model, src, 20), expected)
    for k in (1, 2, 5):
        assert torch.equal(beam_search(model, src, 20, beam_size=k), expected)


@pytest.mark.parametrize("seed", range(2))
def test_a_batch_decodes_as_its_items_one_by_one(seed):
    model, src = random_model(seed), padded_src(seed)
    greedy, beam = greedy_decode(model, src, 12), beam_search(model, src, 12, beam_size=3)
    for b in range(src.shape[0]):
        item = src[b : b + 1, : int((src[b] != PAD).sum())]  # no padding
        for batched, alone in (
            (greedy, greedy_decode(model, item, 12)[0]),
            (beam, beam_search(model, item, 12, 3)[0]),
        ):
            assert torch.equal(batched[b, : len(alone)], alone)
            assert (batched[b, len(alone) :] == PAD).all()


def test_decoding_restores_the_mode_and_tracks_no_gradients():
    model, src = random_model(0), padded_src(0)
    out = greedy_decode(model.train(), src, 5)
    assert model.training and not out.requires_grad
    beam_search(model.eval(), src, 5, beam_size=2)
    assert not model.training
    with inference(model.train()):
        assert not model.training and not torch.is_grad_enabled()
    assert model.training


def test_next_log_probs_are_a_distribution_without_padding():
    model, src = random_model(0), padded_src(0)
    with inference(model):
        src_mask = model.source_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.shape[0], 1), BOS)
        log_probs = next_log_probs(model, ys, memory, src_mask, None)
    assert log_probs.shape == (src.shape[0], 12) and torch.all(log_probs[:, PAD] == float("-inf"))
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(src.shape[0]))


def test_gnmt_length_penalty_is_its_formula():
    lengths = torch.tensor([1, 4, 10])
    torch.testing.assert_close(
        gnmt_length_penalty(lengths, 0.6), ((5 + lengths.float()) / 6) ** 0.6
    )
    assert gnmt_length_penalty(torch.tensor([1]), 0.6).item() == 1.0  # lp(1) = 1


def test_beam_keeps_the_k_best_and_a_finished_hypothesis_unchanged():
    beam = Beam(1, 2, bos_id=BOS, eos_id=EOS, pad_id=PAD, alpha=0.0)
    log_probs = torch.log(torch.tensor([[0.0, 0.0, 0.5, 0.3, 0.2]])).repeat(2, 1)
    beam.advance(log_probs, 1)  # only the first hypothesis is expanded at the start
    assert beam.tokens[:, 1].tolist() == [EOS, 3] and beam.finished.tolist() == [[True, False]]
    beam.advance(torch.log(torch.tensor([[0.1, 0.1, 0.1, 0.1, 0.6]])).repeat(2, 1), 2)
    assert beam.tokens.tolist() == [[BOS, EOS, PAD], [BOS, 3, 4]]
    torch.testing.assert_close(beam.scores, torch.tensor([[0.5, 0.3 * 0.6]]).log())
    assert beam.best().tolist() == [[EOS]]


def test_translate_keeps_the_order_answers_blank_lines_and_does_not_depend_on_batching():
    tok = CharTokenizer.train(["abc 0123456789"])
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny(tok.vocab_size, P_drop=0.0, max_len=16))
    sentences = ["abc", "", "a", "cab ba 12", "  ", "b" * 40]  # the last is cut to max_len
    one = translate(model, tok, sentences, max_len=6, batch_size=1)
    assert one == translate(model, tok, sentences, max_len=6, batch_size=64)
    assert one[1] == one[4] == "" and all(isinstance(s, str) for s in one)
    src = torch.tensor([tok.encode("cab ba 12")])
    assert one[3] == tok.decode(greedy_decode(model, src, 6)[0].tolist())
    beam = translate(model, tok, sentences, beam=3, max_len=6)
    assert beam[3] == tok.decode(beam_search(model, src, 6, beam_size=3)[0].tolist())
