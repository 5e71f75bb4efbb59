"""Checkers for notebook 07's exercises (training): the label-smoothed loss (§5.4), Eq. 3
written by its peak rate (§5.3), and a batcher by tokens and length with a cap on the
sentences per batch (§5.1)."""

from __future__ import annotations

import math
import random
from typing import List, Optional

import torch
import torch.nn.functional as F

from ..batching import make_batch, token_batches
from ..training import LabelSmoothingLoss, noam_lr, smoothed_targets
from . import Feedback, as_number, check_tensor, keeps_rng, run_learner_code
from .own_work import guard, refuses


# ---------------------------------------------------------- Exercise 1: label-smoothed loss
def _loss_case():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 9, generator=g)  # (B, T, V)
    target = torch.randint(1, 9, (3, 5), generator=g)  # (B, T)
    target[1, 3:] = 0
    target[2, 1:] = 0
    return logits, target


@keeps_rng
@refuses(LabelSmoothingLoss, smoothed_targets,
         rule="to write the loss yourself, without the library's `LabelSmoothingLoss`")
def check_label_smoothing(fn) -> Feedback:
    """``fn(logits (B, T, V), target (B, T), epsilon, pad_id)`` -> the scalar loss of §5.4."""
    fb = Feedback("Exercise 1 (the label-smoothed loss)")
    logits, target = _loss_case()
    got = run_learner_code(fb, fn, logits.clone(), target.clone(), 0.1, 0)
    if got is None:
        return fb
    if isinstance(got, torch.Tensor) and got.numel() == 1:
        got = got.reshape(())
    expected = LabelSmoothingLoss(0.1, 0)(logits, target)
    if isinstance(got, (int, float)) and not isinstance(got, bool):
        got = torch.tensor(float(got))
    V, log_p = logits.shape[-1], logits.log_softmax(-1)
    q = smoothed_targets(target, V, 0.1, 0)  # (B, T, V), the rows of padded positions all 0
    q_kept = q.clone()
    q_kept[target == 0] = 0.1 / (V - 1)  # the padded positions' rows kept ...
    q_kept[..., 0] = 0.0  # ... with no mass on the padding class
    counted = ("padding positions are counted in the mean (notebook 07's pitfall): average "
               "only over the positions whose target is not pad_id")
    mistakes = [
        (counted, -(q_kept * log_p).sum(-1).mean()),
        (counted, -(q * log_p).sum(-1).mean()),
        (counted, LabelSmoothingLoss(0.1, None)(logits, target)),
        ("epsilon is spread over all V classes (PyTorch's label_smoothing); here the padding "
         "class gets no mass: spread it over the K = V - 1 others", F.cross_entropy(
             logits.flatten(0, 1), target.flatten(), ignore_index=0, label_smoothing=0.1)),
        ("no smoothing at all: this is the plain cross-entropy",
         LabelSmoothingLoss(0.0, 0)(logits, target)),
        ("the sum over the positions, not their mean", expected * (target != 0).sum()),
    ]
    if not check_tensor(fb, "the loss", got, expected):
        for message, value in mistakes:
            if isinstance(got, torch.Tensor) and got.shape == value.shape and torch.allclose(
                    got.to(value.dtype), value, atol=1e-5, rtol=1e-4):
                fb.fail(f"looks like: {message}")
                break
        return fb
    fb.ok(f"loss = {expected.item():.4f}: epsilon spread over the V - 1 classes that are not "
          "padding, padded positions left out of the mean")
    return fb


# ------------------------------------------------------------ Exercise 2: Eq. 3 by its peak
PEAK_CASES = ((1, 1e-3, 100), (50, 1e-3, 100), (100, 1e-3, 100), (101, 1e-3, 100),
              (400, 1e-3, 100), (9000, 5e-4, 4000), (1, 0.01, 1))


def _wrong_peaks(step: int, peak: float, warmup: int) -> dict:
    """The typical wrong schedules, each with what a learner should read."""
    return {
        "max instead of min: the rate is the smaller of the warm-up line and the decay":
            peak * max(step / warmup, (warmup / step) ** 0.5),
        "the decay is sqrt(step / warmup), which grows: after the peak the rate falls as "
        "sqrt(warmup / step)": peak * min(step / warmup, (step / warmup) ** 0.5),
        "the decay is warmup / step (1/step); Eq. 3 decays as 1/sqrt(step)":
            peak * min(step / warmup, warmup / step),
        "no warm-up: the rate must grow linearly from 0 (step / warmup) up to the peak":
            peak * min(1.0, (warmup / step) ** 0.5),
        "off by one: step counts from 1 and the peak is at step == warmup":
            peak * min((step + 1) / warmup, (warmup / (step + 1)) ** 0.5),
    }


@refuses(noam_lr, rule="to write the schedule yourself, without the library's `noam_lr`")
def check_peak_lr(fn) -> Feedback:
    """``fn(step, peak, warmup)`` -> Eq. 3's shape with its maximum ``peak`` at ``warmup``."""
    fb = Feedback("Exercise 2 (Eq. 3 by its peak)")
    for step, peak, warmup in PEAK_CASES:
        got = as_number(fb, run_learner_code(fb, fn, step, peak, warmup), "the rate")
        if got is None:
            return fb
        expected = peak * min(step / warmup, (warmup / step) ** 0.5)
        if not math.isclose(got, expected, rel_tol=1e-6):
            fb.fail(f"peak_lr(step={step}, peak={peak}, warmup={warmup}) = {got:.6g}, "
                    f"expected {expected:.6g}")
            for message, value in _wrong_peaks(step, peak, warmup).items():
                if math.isclose(got, value, rel_tol=1e-6):
                    fb.fail(f"looks like: {message}")
                    break
            return fb
    fb.ok("a linear warm-up to the peak at step == warmup, then a decay as 1/sqrt(step)")
    d_model, warmup = 512, 4000
    for step in (1, 1000, 4000, 4001, 100000):
        got = as_number(fb, run_learner_code(fb, fn, step, (d_model * warmup) ** -0.5, warmup),
                        "the rate")
        if got is None:
            return fb
        if not math.isclose(got, noam_lr(step, d_model, warmup), rel_tol=1e-6):
            fb.fail(f"with peak = (d_model * warmup)^-0.5 it should be Eq. 3, but at step {step} "
                    f"it gives {got:.6g} for {noam_lr(step, d_model, warmup):.6g}")
            return fb
    fb.ok("with peak = (d_model * warmup)^-0.5 it is Eq. 3 itself (d_model = 512, warmup = 4000)")
    return fb


# ------------------------------------------------- Exercise 3: a batcher with a sentence cap
def _batch_case(n: int = 240, seed: int = 7):
    """Examples of many lengths (source 2-30 tokens, target 1-29), ids 4-39."""
    rng = random.Random(seed)
    return [([rng.randrange(4, 40) for _ in range(rng.randint(2, 30))],
             [rng.randrange(4, 40) for _ in range(rng.randint(1, 29))]) for _ in range(n)]


def _cost(example) -> int:
    return max(len(example[0]), len(example[1]) + 1)


def _padding(examples, groups: List[List[int]]) -> float:
    """The share of the batches' source and target positions that hold padding."""
    real = sum(len(examples[i][0]) + len(examples[i][1]) + 1 for g in groups for i in g)
    slots = sum(len(g) * (max(len(examples[i][0]) for i in g)
                          + max(len(examples[i][1]) for i in g) + 1) for g in groups)
    return 1 - real / slots


def _reference_groups(examples, max_tokens: int, max_sentences: int) -> List[List[int]]:
    order = sorted(range(len(examples)), key=lambda i: _cost(examples[i]))
    groups: List[List[int]] = []
    for i in order:
        g = groups[-1] if groups else None
        if g and len(g) < max_sentences and (len(g) + 1) * _cost(examples[i]) <= max_tokens:
            g.append(i)
        else:
            groups.append([i])
    return groups


def _as_groups(fb: Feedback, got, n: int) -> Optional[List[List[int]]]:
    """The batches' indices, after checking that ``got`` is a list of batches."""
    if not isinstance(got, (list, tuple)) or not got:
        fb.fail(f"return a list of Batch objects (make_batch), got {type(got).__name__}")
        return None
    groups = []
    for k, b in enumerate(got):
        fields = [getattr(b, name, None) for name in ("src", "tgt_in", "tgt_out")]
        indices = getattr(b, "indices", None)
        if not all(isinstance(t, torch.Tensor) for t in fields):
            fb.fail(f"batch {k} is a {type(b).__name__}, not a Batch with src, tgt_in and "
                    "tgt_out (build each with make_batch)")
            return None
        if not isinstance(indices, (list, tuple)) or not indices or not all(
                isinstance(i, int) and 0 <= i < n for i in indices):
            fb.fail(f"batch {k}: set batch.indices to the positions of its examples in "
                    f"`examples` (a list of ints), got {indices!r:.60}")
            return None
        groups.append(list(indices))
    return groups


def _one_call(fb: Feedback, fn, examples, max_tokens, max_sentences, seed):
    copy = [(list(s), list(t)) for s, t in examples]
    got = run_learner_code(fb, fn, copy, max_tokens, max_sentences, seed)
    return None if got is None else _as_groups(fb, got, len(examples)), got


@keeps_rng
@refuses(token_batches, rule="to write the batcher yourself, without the library's "
         "`token_batches`")
def check_capped_batches(fn) -> Feedback:
    """``fn(examples, max_tokens, max_sentences, seed)`` -> a list of ``Batch``: each example
    once; at most ``max_tokens`` padded tokens per side and ``max_sentences`` rows a batch;
    grouped by length; the batch order shuffled by ``seed``."""
    fb = Feedback("Exercise 3 (batches with a cap on sentences)")
    examples, max_tokens, max_sentences = _batch_case(), 200, 8
    groups, got = _one_call(fb, fn, examples, max_tokens, max_sentences, 0)
    if groups is None:
        return fb
    seen = sorted(i for g in groups for i in g)
    if seen != list(range(len(examples))):
        twice = len(seen) - len(set(seen))
        missing = len(examples) - len(set(seen))
        fb.fail(f"each example must be in exactly one batch: {missing} missing, {twice} "
                "more than once")
        return fb
    for k, (g, b) in enumerate(zip(groups, got)):
        want = make_batch([examples[i] for i in g], 0)
        for name in ("src", "tgt_in", "tgt_out"):
            if not torch.equal(getattr(b, name).long(), getattr(want, name)):
                fb.fail(f"batch {k}: {name} is not make_batch of the examples its indices name "
                        "(the same rows in the same order)")
                return fb
        B, S, T = len(g), want.src.shape[1], want.tgt_in.shape[1]
        if B > max_sentences:
            fb.fail(f"batch {k} holds {B} sentences: the cap is max_sentences = {max_sentences}")
            return fb
        if B * S > max_tokens or B * T > max_tokens:
            side, width = ("source", S) if B * S > max_tokens else ("target", T)
            hint = (" (the target side is <s> y: len(y) + 1 positions)" if side == "target"
                    else "")
            fb.fail(f"batch {k}: {B} rows x {width} {side} positions = {B * width} padded "
                    f"tokens, more than max_tokens = {max_tokens}{hint}")
            return fb
    fb.ok(f"every example once; at most {max_sentences} sentences and {max_tokens} padded "
          "tokens a side in each batch")
    best = _reference_groups(examples, max_tokens, max_sentences)
    if len(groups) > 1.25 * len(best) + 1:
        fb.fail(f"{len(groups)} batches where {len(best)} would do: add rows to a batch as "
                "long as the next one fits")
        return fb
    if _padding(examples, groups) > _padding(examples, best) + 0.08:
        fb.fail(f"{_padding(examples, groups):.0%} of the positions are padding (sorted by "
                f"length: {_padding(examples, best):.0%}): sort the examples by length before "
                "cutting batches")
        return fb
    fb.ok(f"{len(groups)} batches, grouped by length: {_padding(examples, groups):.0%} padding")
    again, _ = _one_call(fb, fn, examples, max_tokens, max_sentences, 0)
    other, _ = _one_call(fb, fn, examples, max_tokens, max_sentences, 1)
    if again is None or other is None:
        return fb
    if again != groups:
        fb.fail("two calls with seed=0 gave different batches: draw from random.Random(seed), "
                "not from the global random module")
        return fb
    widths = [max(_cost(examples[i]) for i in g) for g in groups]
    if widths == sorted(widths):
        fb.fail("the batches come shortest first: shuffle their order with random.Random(seed), "
                "or every epoch starts with the short examples and ends with the long ones")
        return fb
    if other == groups:
        fb.fail("seed=1 gives the very batches of seed=0: the order must depend on the seed "
                "(the loop passes seed + epoch)")
        return fb
    fb.ok("the same batches for the same seed, another order for another seed")
    return fb


def capped_batches(examples, max_tokens, max_sentences, seed):
    """A right answer to exercise 3."""
    rng = random.Random(seed)
    width = [max(len(s), len(t) + 1) for s, t in examples]
    order = sorted(range(len(examples)), key=lambda i: (width[i], rng.random()))
    groups = [[]]
    for i in order:  # widths only grow along `order`: the new row is the widest
        full = len(groups[-1]) == max_sentences or (len(groups[-1]) + 1) * width[i] > max_tokens
        if groups[-1] and full:
            groups.append([])
        groups[-1].append(i)
    rng.shuffle(groups)
    batches = []
    for g in groups:
        batch = make_batch([examples[i] for i in g])
        batch.indices = g
        batches.append(batch)
    return batches


CHECKS = {
    "check_label_smoothing": (check_label_smoothing, lambda: _own_label_smoothing),
    "check_peak_lr": (check_peak_lr,
                      lambda: lambda step, peak, warmup: peak * min(step / warmup,
                                                                     (warmup / step) ** 0.5)),
    "check_capped_batches": (check_capped_batches, lambda: capped_batches),
}


def _own_label_smoothing(logits, target, epsilon, pad_id):
    """A right answer to exercise 1."""
    V = logits.shape[-1]
    q = torch.full_like(logits, epsilon / (V - 1))  # (B, T, V)
    q.scatter_(-1, target.unsqueeze(-1), 1 - epsilon + epsilon / (V - 1))
    q[..., pad_id] = 0.0
    per_position = -(q * logits.log_softmax(-1)).sum(-1)  # (B, T)
    return per_position[target != pad_id].mean()


guard(globals())  # an answer that is, or calls, a right answer above is refused
