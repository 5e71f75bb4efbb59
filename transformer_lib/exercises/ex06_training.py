"""Checkers for notebook 06 (training: the warm-up schedule §5.3, label smoothing §5.4)."""
from __future__ import annotations

import math

import torch

from ..training.loss import LabelSmoothingLoss
from ..training.schedule import noam_lr
from . import Feedback, run_learner_code

SCHEDULE_CASES = ((1, 512, 4000), (100, 512, 4000), (4000, 512, 4000), (20000, 512, 4000),
                  (50, 64, 10))


def _wrong_schedules(step: int, d_model: int, warmup: int) -> dict:
    """The classic wrong schedules, each with the diagnosis a learner should read."""
    return {
        "no d_model^-0.5 factor in front":
            min(step ** -0.5, step * warmup ** -1.5),
        "warm-up uses warmup_steps^-0.5 instead of warmup_steps^-1.5":
            d_model ** -0.5 * min(step ** -0.5, step * warmup ** -0.5),
        "max instead of min: the rate must be the smaller of the two branches":
            d_model ** -0.5 * max(step ** -0.5, step * warmup ** -1.5),
        "off by one: step counts from 1 (the first update); you used step + 1":
            noam_lr(step + 1, d_model, warmup),
    }


def check_noam_lr(fn) -> Feedback:
    """``fn(step, d_model, warmup_steps)`` -> the learning rate of §5.3, Eq. 3."""
    fb = Feedback("Exercise 1 (the warm-up schedule)")
    for step, d_model, warmup in SCHEDULE_CASES:
        got = run_learner_code(fb, fn, step, d_model, warmup)
        if got is None:
            return fb
        expected = noam_lr(step, d_model, warmup)
        if not isinstance(got, (int, float)) or not math.isclose(got, expected, rel_tol=1e-6):
            fb.fail(f"lr(step={step}, d_model={d_model}, warmup={warmup}) = {got!r}, "
                    f"expected {expected:.6g}")
            for message, value in _wrong_schedules(step, d_model, warmup).items():
                if isinstance(got, (int, float)) and math.isclose(got, value, rel_tol=1e-6):
                    fb.fail(message)
                    break
            return fb
    fb.ok("matches Eq. 3 during warm-up, at its end and during the 1/sqrt(step) decay")
    return fb


def _loss_cases():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 9, generator=g)                               # (B, T, V)
    target = torch.randint(1, 9, (3, 5), generator=g)                        # (B, T)
    target[1, 3:] = 0
    target[2, 1:] = 0
    return logits, target


def check_label_smoothing(fn) -> Feedback:
    """``fn(logits (B,T,V), target (B,T), epsilon, pad_id)`` -> scalar loss (§5.4)."""
    fb = Feedback("Exercise 2 (label-smoothed loss)")
    logits, target = _loss_cases()
    got = run_learner_code(fb, fn, logits.clone(), target.clone(), 0.1, 0)
    if got is None:
        return fb
    if not isinstance(got, torch.Tensor) or got.numel() != 1:
        fb.fail(f"the loss should be a scalar tensor, got {type(got).__name__} "
                f"{tuple(getattr(got, 'shape', ()))}")
        return fb
    expected = LabelSmoothingLoss(0.1, 0)(logits, target)
    if torch.allclose(got.float(), expected, atol=1e-5):
        fb.ok(f"loss = {expected.item():.4f}: epsilon spread over the V - 1 non-padding "
              "classes, padding positions ignored")
        return fb
    fb.fail(f"loss = {got.item():.4f}, expected {expected.item():.4f}")
    wrong = {
        "padding positions are counted: average only over targets != pad_id":
            LabelSmoothingLoss(0.1, None)(logits, target),
        "epsilon is spread over all V classes (PyTorch's label_smoothing); here the padding "
        "class gets no mass, so spread it over V - 1":
            torch.nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten(),
                                              ignore_index=0, label_smoothing=0.1),
        "no smoothing at all: this is the plain cross-entropy":
            LabelSmoothingLoss(0.0, 0)(logits, target),
    }
    for message, value in wrong.items():
        if torch.allclose(got.float(), value, atol=1e-5):
            fb.fail(message)
            break
    return fb
