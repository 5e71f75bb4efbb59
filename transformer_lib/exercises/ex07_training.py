"""Checkers for notebook 07 (training: the warm-up schedule §5.3, label smoothing §5.4, the
plain cross-entropy that compares runs trained with different smoothings)."""

from __future__ import annotations

import math

import torch

from ..training.loss import LabelSmoothingLoss, smoothed_targets
from ..training.schedule import noam_lr
from . import Feedback, as_number, keeps_rng, run_learner_code
from .own_work import refuses

SCHEDULE_CASES = (
    (1, 512, 4000),
    (100, 512, 4000),
    (4000, 512, 4000),
    (20000, 512, 4000),
    (50, 64, 10),
)


def _wrong_schedules(step: int, d_model: int, warmup: int) -> dict:
    """The classic wrong schedules, each with the diagnosis a learner should read."""
    return {
        "no d_model^-0.5 factor in front": min(step**-0.5, step * warmup**-1.5),
        "warm-up uses warmup_steps^-0.5 instead of warmup_steps^-1.5": d_model**-0.5
        * min(step**-0.5, step * warmup**-0.5),
        "max instead of min: the rate must be the smaller of the two branches": d_model**-0.5
        * max(step**-0.5, step * warmup**-1.5),
        "off by one: step counts from 1 (the first update); you used step + 1": noam_lr(
            step + 1, d_model, warmup
        ),
    }


@refuses(noam_lr, rule="to write Eq. 3 yourself, not with the library's `noam_lr`")
def check_noam_lr(fn) -> Feedback:
    """``fn(step, d_model, warmup_steps)`` -> the learning rate of §5.3, Eq. 3."""
    fb = Feedback("Exercise 1 (the warm-up schedule)")
    for step, d_model, warmup in SCHEDULE_CASES:
        got = run_learner_code(fb, fn, step, d_model, warmup)
        if got is None:
            return fb
        expected = noam_lr(step, d_model, warmup)
        if not isinstance(got, (int, float)) or not math.isclose(got, expected, rel_tol=1e-6):
            fb.fail(
                f"lr(step={step}, d_model={d_model}, warmup={warmup}) = {got!r}, "
                f"expected {expected:.6g}"
            )
            for message, value in _wrong_schedules(step, d_model, warmup).items():
                if isinstance(got, (int, float)) and math.isclose(got, value, rel_tol=1e-6):
                    fb.fail(message)
                    break
            return fb
    fb.ok("matches Eq. 3 during warm-up, at its end and during the 1/sqrt(step) decay")
    return fb


def _loss_cases():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 9, generator=g)  # (B, T, V)
    target = torch.randint(1, 9, (3, 5), generator=g)  # (B, T)
    target[1, 3:] = 0
    target[2, 1:] = 0
    return logits, target


@refuses(
    LabelSmoothingLoss,
    smoothed_targets,
    rule="to write the loss yourself, not with the library's `LabelSmoothingLoss`",
)
def check_label_smoothing(fn) -> Feedback:
    """``fn(logits (B,T,V), target (B,T), epsilon, pad_id)`` -> scalar loss (§5.4)."""
    fb = Feedback("Exercise 2 (label-smoothed loss)")
    logits, target = _loss_cases()
    got = run_learner_code(fb, fn, logits.clone(), target.clone(), 0.1, 0)
    if got is None:
        return fb
    if not isinstance(got, torch.Tensor) or got.numel() != 1:
        fb.fail(
            f"the loss should be a scalar tensor, got {type(got).__name__} "
            f"{tuple(getattr(got, 'shape', ()))}"
        )
        return fb
    expected = LabelSmoothingLoss(0.1, 0)(logits, target)
    if torch.allclose(got.float(), expected, atol=1e-5):
        fb.ok(
            f"loss = {expected.item():.4f}: epsilon spread over the V - 1 non-padding "
            "classes, padding positions ignored"
        )
        return fb
    fb.fail(f"loss = {got.item():.4f}, expected {expected.item():.4f}")
    wrong = {
        "padding positions are counted: average only over targets != pad_id": LabelSmoothingLoss(
            0.1, None
        )(logits, target),
        "epsilon is spread over all V classes (PyTorch's label_smoothing); here the padding "
        "class gets no mass, so spread it over V - 1": torch.nn.functional.cross_entropy(
            logits.flatten(0, 1), target.flatten(), ignore_index=0, label_smoothing=0.1
        ),
        "no smoothing at all: this is the plain cross-entropy": LabelSmoothingLoss(0.0, 0)(
            logits, target
        ),
    }
    for message, value in wrong.items():
        if torch.allclose(got.float(), value, atol=1e-5):
            fb.fail(message)
            break
    return fb


# Exercise 3 --------------------------------------------------------------------------
def _nll_case():
    """A tiny model with dropout (so training mode shows) and batches of unequal sizes."""
    from ..config import TransformerConfig
    from ..data.batching import make_batch
    from ..model import Transformer

    g = torch.Generator().manual_seed(3)
    torch.manual_seed(3)
    model = Transformer(TransformerConfig.tiny(12, P_drop=0.3, max_len=16))
    examples = [
        (
            torch.randint(3, 12, (int(n),), generator=g).tolist(),
            torch.randint(3, 12, (int(m),), generator=g).tolist(),
        )
        for n, m in ((4, 3), (6, 7), (3, 2), (5, 6), (2, 1), (7, 5))
    ]
    batches = [
        make_batch(examples, [0, 1, 2]),
        make_batch(examples, [3]),
        make_batch(examples, [4, 5]),
    ]
    return model, batches


def _sums(model, batches, criterion):
    """(loss summed over the non-padding target tokens, their number, per-batch means)."""
    total, tokens, means = 0.0, 0, []
    with torch.no_grad():
        for b in batches:
            mean = criterion(model(b.src, b.tgt_in), b.tgt_out).item()
            total, tokens = total + mean * b.n_tokens, tokens + b.n_tokens
            means.append(mean)
    return total, tokens, means


@keeps_rng
def check_validation_cross_entropy(fn) -> Feedback:
    """``fn(model, batches, pad_id)`` -> the plain cross-entropy in nats per target token
    over all batches (padding excluded), the number to compare across label smoothings."""
    fb = Feedback("Exercise 3 (the plain cross-entropy, like with like)")
    model, batches = _nll_case()
    model.train()
    first = run_learner_code(fb, fn, model, batches, 0)
    if first is None or (first := as_number(fb, first, "the cross-entropy")) is None:
        return fb
    model.train()
    second = as_number(fb, run_learner_code(fb, fn, model, batches, 0), "a second call")
    if second is None:
        return fb
    model.eval()
    total, tokens, means = _sums(model, batches, LabelSmoothingLoss(0.0, 0))
    expected = total / tokens
    if first != second:
        fb.fail(
            f"two calls gave {first:.4f} and {second:.4f}: dropout is on. Call "
            "model.eval() first (and torch.no_grad(): no gradients are needed)"
        )
        return fb
    if math.isclose(first, expected, rel_tol=1e-4):
        fb.ok(
            f"{expected:.4f} nats per target token (perplexity {math.exp(expected):.2f}), "
            "padding excluded, weighted by tokens, in eval mode"
        )
        return fb
    fb.fail(f"got {first:.4f}, expected {expected:.4f} nats per target token")
    smoothed, _, _ = _sums(model, batches, LabelSmoothingLoss(0.1, 0))
    padded, _, _ = _sums(model, batches, LabelSmoothingLoss(0.0, None))
    mistakes = {
        "the label-smoothed loss (the training criterion): its floor is the entropy of q, "
        "not 0; compare runs on the plain cross-entropy, epsilon = 0": smoothed / tokens,
        "the mean of the batches' means: batches hold different numbers of tokens; sum "
        "the losses over all tokens, then divide by their number": sum(means) / len(means),
        "padding counted: ignore the positions whose target is pad_id": padded / tokens,
        "this is the perplexity, exp of the cross-entropy: return the cross-entropy "
        "itself (nats)": math.exp(expected),
        "bits (log base 2): the loss is in nats (natural log)": expected / math.log(2),
    }
    for message, value in mistakes.items():
        if math.isclose(first, value, rel_tol=1e-4):
            fb.fail(f"looks like: {message}")
            break
    return fb
