"""Automatic checks for the notebooks' exercises.

Each checker takes the learner's code (a function or module), runs it on inputs of its
own, compares against the library's reference, and returns a :class:`Feedback` that says
what is right or wrong and, for the classic mistakes, which mistake it looks like.
Checkers never raise on a wrong answer: a wrong answer is feedback, not a crash.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List

import torch


@dataclass
class Feedback:
    """The outcome of one exercise check: passed or not, and why."""

    exercise: str
    passed: bool = True
    notes: List[str] = field(default_factory=list)

    def ok(self, message: str) -> None:
        self.notes.append(f"  ✓ {message}")

    def fail(self, message: str) -> None:
        self.passed = False
        self.notes.append(f"  ✗ {message}")

    def __str__(self) -> str:
        verdict = "correct" if self.passed else "not yet"
        return "\n".join([f"{self.exercise}: {verdict}", *self.notes])

    def __repr__(self) -> str:
        return str(self)

    def __bool__(self) -> bool:
        return self.passed


def run_learner_code(feedback: Feedback, fn: Callable, *args, **kwargs):
    """Call the learner's ``fn``; record an exception as feedback and return None."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        feedback.fail("not implemented yet: replace `raise NotImplementedError` with your code")
    except Exception as exc:  # the learner's error is the feedback
        feedback.fail(f"your code raised {type(exc).__name__}: {exc}")
    return None


def check_tensor(feedback: Feedback, name: str, got, expected: torch.Tensor,
                 atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """Compare type, shape, dtype class and values; record what differs first."""
    if not isinstance(got, torch.Tensor):
        feedback.fail(f"{name} should be a torch.Tensor, got {type(got).__name__}")
        return False
    if got.shape != expected.shape:
        feedback.fail(f"{name} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}")
        return False
    if got.dtype.is_floating_point != expected.dtype.is_floating_point:
        feedback.fail(f"{name} has dtype {got.dtype}, expected {expected.dtype}")
        return False
    if torch.isnan(got).any() and not torch.isnan(expected).any():
        feedback.fail(f"{name} contains NaN (e.g. a softmax over a row whose every entry "
                      "is -inf)")
        return False
    if not torch.allclose(got.to(expected.dtype), expected, atol=atol, rtol=rtol):
        err = (got.to(expected.dtype) - expected).abs().max().item()
        feedback.fail(f"{name} has the right shape but wrong values (max error {err:.3g})")
        return False
    feedback.ok(f"{name}: shape {tuple(expected.shape)} and values match")
    return True
