"""Checkers for notebook 08 (inference): greedy decoding, one beam-search step, GNMT's
length-penalised score."""

from __future__ import annotations

from typing import Callable, Optional

import torch

from ..config import TransformerConfig
from ..search import Beam, beam_search, gnmt_length_penalty, greedy_decode
from ..model import Transformer
from . import Feedback, as_number, keeps_rng, run_learner_code
from .own_work import refuses

Tensor = torch.Tensor
PAD, BOS, EOS = 0, 1, 2


def _toy_model_and_source():
    """A random untied model (seed chosen so that some rows stop early), in training mode."""
    torch.manual_seed(4)
    config = TransformerConfig.tiny(src_vocab_size=20, tgt_vocab_size=12, P_drop=0.3)
    model = Transformer(config).train()
    src = torch.randint(3, 20, (6, 7), generator=torch.Generator().manual_seed(4))
    src[1, 4:], src[5, 1:] = PAD, PAD  # (6, 7), padded
    return model, src


def _greedy_mistake(got: Tensor, expected: Tensor) -> Optional[str]:
    """Name the classic greedy-decoding mistake that ``got`` shows, if any."""
    if got.shape[1] == expected.shape[1] + 1 and (got[:, 0] == BOS).all():
        return "the output starts with BOS: return only the tokens after it"
    for row in got:
        hit = (row == EOS).nonzero()
        end = int(hit[0]) if hit.numel() else len(row)
        if (row[:end] == PAD).any():
            return (
                "a row produced the padding token before its end: padding is never a "
                "real output, so set its logit to -inf before taking the argmax"
            )
        if hit.numel() and (row[end + 1 :] != PAD).any():
            return (
                "a row goes on after its EOS: once a row has produced EOS, fill the "
                "rest with padding (keep a `done` flag per row)"
            )
    if got.shape[1] > expected.shape[1]:
        return (
            "decoding goes on after every row has finished: stop as soon as all rows "
            "have produced EOS"
        )
    return None


@refuses(
    greedy_decode,
    beam_search,
    rule="to write the loop yourself, not with the library's `greedy_decode`",
)
@keeps_rng
def check_greedy(fn: Callable) -> Feedback:
    """``fn(model, src, max_len, bos_id, eos_id)`` -> (B, <= max_len) ids after BOS,
    EOS included, padding after it; the model is handed over in training mode."""
    fb = Feedback("Exercise 1 (greedy decoding)")
    model, src = _toy_model_and_source()
    expected = greedy_decode(model, src, 10, BOS, EOS)  # (6, <= 10)
    model.train()
    got = run_learner_code(fb, fn, model, src, 10, BOS, EOS)
    if got is None:
        return fb
    if not isinstance(got, Tensor) or got.dim() != 2 or got.shape[0] != src.shape[0]:
        fb.fail(
            f"return a (B, length) tensor of ids with B = {src.shape[0]}, got "
            f"{getattr(got, 'shape', type(got).__name__)}"
        )
        return fb
    model.train()
    again = fn(model, src, 10, BOS, EOS)
    if got.shape != again.shape or not torch.equal(got, again):
        fb.fail(
            "two calls gave different outputs: dropout is on. Call model.eval() first "
            "(and decode under torch.no_grad())"
        )
        return fb
    if got.shape == expected.shape and torch.equal(got.long(), expected):
        fb.ok(
            f"the same {tuple(expected.shape)} tokens as the library's greedy_decode, "
            "EOS then padding where rows stop"
        )
        return fb
    fb.fail(
        f"the tokens differ from greedy_decode's (got shape {tuple(got.shape)}, "
        f"expected {tuple(expected.shape)})"
    )
    mistake = _greedy_mistake(got, expected)
    if mistake:
        fb.fail(f"looks like: {mistake}")
    return fb


def _step_reference(scores: Tensor, log_probs: Tensor, k: int):
    B, K, V = log_probs.shape
    total = scores[..., None] + log_probs  # (B, K, V)
    best, index = total.view(B, K * V).topk(k, dim=1)  # (B, k)
    return best, index // V, index % V


@refuses(Beam, rule="to write the step yourself, not with the library's `Beam`")
@keeps_rng
def check_beam_step(fn: Callable) -> Feedback:
    """``fn(scores (B, K), log_probs (B, K, V), k)`` -> (new_scores, parent, token), each
    (B, k), best first: the k best one-token extensions over all K*V candidates per item."""
    fb = Feedback("Exercise 2 (one step of beam search)")
    torch.manual_seed(0)
    B, K, V, k = 2, 3, 5, 3
    scores = -torch.rand(B, K) * 3  # (B, K)
    log_probs = torch.randn(B, K, V).log_softmax(-1)  # (B, K, V)
    got = run_learner_code(fb, fn, scores.clone(), log_probs.clone(), k)
    if got is None:
        return fb
    if not (
        isinstance(got, (tuple, list))
        and len(got) == 3
        and all(isinstance(g, Tensor) and g.shape == (B, k) for g in got)
    ):
        fb.fail(f"return three ({B}, {k}) tensors: (new_scores, parent, token)")
        return fb
    best, parent, token = _step_reference(scores, log_probs, k)
    if (
        torch.allclose(got[0], best)
        and torch.equal(got[1].long(), parent)
        and torch.equal(got[2].long(), token)
    ):
        fb.ok("the k best of the K*V candidates per item, with their parents and tokens")
        return fb
    fb.fail("the selected candidates differ from the k best of score + log-prob")
    per_beam = (scores[..., None] + log_probs).max(-1).values.sort(-1, descending=True).values
    no_score = _step_reference(torch.zeros_like(scores), log_probs, k)[0]
    swapped = torch.equal(got[1].long(), token) and torch.equal(got[2].long(), parent)
    for message, wrong in (
        (
            "the best token of each beam was kept; compare all K*V candidates of an item "
            "together (flatten to (B, K*V) before topk)",
            torch.allclose(got[0], per_beam),
        ),
        (
            "the parent's score was not added: a hypothesis's score is the sum of all its "
            "log-probs",
            torch.allclose(got[0], no_score),
        ),
        (
            "parent and token are mixed up: with flat index i, parent = i // V, token = i % V",
            swapped,
        ),
    ):
        if wrong:
            fb.fail(f"looks like: {message}")
            break
    return fb


@refuses(
    gnmt_length_penalty,
    rule="to write the score yourself, not with the library's `gnmt_length_penalty`",
)
def check_gnmt_score(fn: Callable) -> Feedback:
    """``fn(log_prob, length, alpha)`` -> log_prob / lp(length), lp = ((5 + length) / 6)^alpha."""
    fb = Feedback("Exercise 3 (length-penalised score, Wu et al. 2016)")
    cases = ((-3.0, 4, 0.6), (-3.0, 4, 0.0), (-7.5, 12, 1.0), (-0.4, 1, 0.6))
    mistakes = {
        "divided by length^alpha instead of ((5 + length) / 6)^alpha": lambda lp, n, a: lp / n**a,
        "multiplied by the penalty instead of dividing by it": lambda lp, n, a: lp
        * ((5 + n) / 6) ** a,
        "(5 + length)^alpha without dividing by 6^alpha (the same ranking, other numbers)": lambda lp,
        n,
        a: lp / (5 + n) ** a,
    }
    for case in cases:
        got = run_learner_code(fb, fn, *case)
        if got is None:
            return fb
        got = as_number(fb, got, f"score{case}")
        if got is None:
            return fb
        expected = case[0] / float(gnmt_length_penalty(torch.tensor(case[1]), case[2]))
        if abs(got - expected) > 1e-6 * max(1.0, abs(expected)):
            fb.fail(f"score{case} = {got:.4f}, expected {expected:.4f}")
            answers = [
                as_number(Feedback(""), run_learner_code(Feedback(""), fn, *c), "") for c in cases
            ]
            for message, wrong in mistakes.items():
                if all(a is not None and abs(a - wrong(*c)) < 1e-6 for a, c in zip(answers, cases)):
                    fb.fail(f"looks like: {message}")
                    break
            return fb
    fb.ok("log P / ((5 + |Y|) / 6)^alpha on " + ", ".join(str(c) for c in cases))
    return fb
