"""Automatic checks for the notebooks' exercises.

Each checker takes the learner's code (a function or module), runs it on inputs of its
own, compares against the library's reference, and returns a :class:`Feedback` that says
what is right or wrong and, for the classic mistakes, which mistake it looks like.
Checkers never raise on a wrong answer: a wrong answer is feedback, not a crash.

A notebook's check cell shows the feedback, and grades with a hidden ``assert`` (a
:class:`Feedback` is truthy when the answer passed). Each ``exNN`` module ends with
``CHECKS = {name: (checker, make_right_answer)}``: every checker with a function that returns a
right answer, so that one test can call every checker with right and wrong answers.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional

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
    """Call the learner's ``fn``. Returns its result, or None after recording why there is
    none as a failure: an exception, or a function that returned nothing (a forgotten
    ``return``). So a caller's ``if got is None: return feedback`` always says "not yet"."""
    if not callable(fn):
        feedback.fail(f"pass your function itself, got a {type(fn).__name__}")
        return None
    try:
        result = fn(*args, **kwargs)
    except NotImplementedError:
        feedback.fail("not implemented yet: replace `raise NotImplementedError` with your code")
        return None
    except Exception as exc:  # the learner's error is the feedback
        feedback.fail(f"your code raised {type(exc).__name__}: {exc}")
        return None
    if result is None:
        feedback.fail("your function returned None: did you forget a `return` statement?")
    return result


def built_a_module(feedback: Feedback, obj) -> bool:
    """Whether the learner's class built an ``nn.Module``; records why not."""
    from torch import nn

    if isinstance(obj, nn.Module):
        return True
    feedback.fail(
        f"your class should build an nn.Module (subclass nn.Module and call "
        f"super().__init__() first), got a {type(obj).__name__}"
    )
    return False


def as_number(feedback: Feedback, got, what: str) -> Optional[float]:
    """``got`` as a float (a Python number or a one-element tensor), else None with why."""
    if (
        isinstance(got, bool)
        or not isinstance(got, (int, float, torch.Tensor))
        or (isinstance(got, torch.Tensor) and got.numel() != 1)
    ):
        shape = f" of shape {tuple(got.shape)}" if isinstance(got, torch.Tensor) else ""
        feedback.fail(f"{what} should be a number, got a {type(got).__name__}{shape}")
        return None
    return float(got)


def check_tensor(
    feedback: Feedback,
    name: str,
    got,
    expected: torch.Tensor,
    atol: float = 1e-5,
    rtol: float = 1e-4,
) -> bool:
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
        feedback.fail(f"{name} contains NaN (e.g. a softmax over a row whose every entry is -inf)")
        return False
    if not torch.allclose(got.to(expected.dtype), expected, atol=atol, rtol=rtol):
        err = (got.to(expected.dtype) - expected).abs().max().item()
        feedback.fail(f"{name} has the right shape but wrong values (max error {err:.3g})")
        return False
    feedback.ok(f"{name}: shape {tuple(expected.shape)} and values match")
    return True


def keeps_rng(checker: Callable[..., Feedback]) -> Callable[..., Feedback]:
    """Run a checker without touching the global random state (notebooks stay reproducible)."""

    @functools.wraps(checker)
    def wrapped(*args, **kwargs) -> Feedback:
        with torch.random.fork_rng(devices=[]):
            return checker(*args, **kwargs)

    return wrapped


def first_match(got: torch.Tensor, candidates: Dict[str, torch.Tensor]) -> Optional[str]:
    """The message of the first candidate (a known wrong answer) that ``got`` equals."""
    for message, value in candidates.items():
        if (
            isinstance(got, torch.Tensor)
            and got.shape == value.shape
            and torch.allclose(got.to(value.dtype), value, atol=1e-5, rtol=1e-4)
        ):
            return message
    return None


def check_count(
    feedback: Feedback,
    fn: Callable[..., int],
    cases: Iterable[tuple],
    truth: Callable[..., int],
    mistakes: Dict[str, Callable[..., int]],
) -> None:
    """Compare a learner's parameter-count formula with ``truth`` on several ``cases``;
    when it is wrong, name the known mistake (a formula in ``mistakes``) it matches everywhere."""
    cases = list(cases)
    answers = []
    for case in cases:
        got = run_learner_code(feedback, fn, *case)
        if got is None:
            return
        if isinstance(got, bool) or not isinstance(got, int):
            feedback.fail(f"return a Python int, got {type(got).__name__} for {case}")
            return
        answers.append(got)
    expected = [truth(*case) for case in cases]
    if answers == expected:
        feedback.ok(
            "the formula matches the model's parameter count on "
            + ", ".join(f"{c} -> {e:,}" for c, e in zip(cases, expected))
        )
        return
    case, got, want = next((c, g, e) for c, g, e in zip(cases, answers, expected) if g != e)
    feedback.fail(f"for {case} you get {got:,}, the model has {want:,} (off by {got - want:+,})")
    for message, mistake in mistakes.items():
        if all(a == mistake(*c) for a, c in zip(answers, cases)):
            feedback.fail(f"looks like: {message}")
            return
