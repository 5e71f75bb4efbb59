"""The learner's own work: an exercise that asks for a piece the library has refuses the
library's piece.

``make_table = sinusoidal_table`` computes the right table, so a checker comparing values
alone would call it correct. A checker decorated with :func:`refuses` still compares the
values (the feedback says what is right), then says "not yet", naming the exercise's rule,
when the learner's answer

- **is** one of the library's objects (directly, through ``functools.partial``, a bound
  method or ``functools.wraps``),
- **subclasses** a library class that the exercise asks to write, or
- **calls** one of them while the checker runs it: a lambda around ``sinusoidal_table``, a
  module holding a ``PositionwiseFeedForward``, ``ours(x)`` when the exercise asks to run
  PyTorch's module instead. Only calls made by the learner's code count (the checker's own
  reference computations, and the library calling itself from a reference, do not): a
  profile hook watches the forbidden functions' code objects and looks down the stack for
  a frame outside the package and outside the installed libraries.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import sysconfig
from typing import Callable, Dict, List, Optional, Tuple

from . import Feedback

_EXERCISES = os.path.dirname(os.path.realpath(__file__))
_PACKAGE = os.path.dirname(_EXERCISES)
_INSTALLED = tuple(
    sorted(
        {
            os.path.realpath(p)
            for key in ("stdlib", "platstdlib", "purelib", "platlib")
            if (p := sysconfig.get_paths().get(key))
        }
    )
)


@functools.lru_cache(maxsize=4096)
def _kind(filename: str) -> str:
    """'checker' (this folder), 'library' (the package or an installed library) or 'learner'."""
    if filename.startswith("<") and not filename.startswith(
        ("<ipython-input", "<stdin>", "<console>")
    ):
        return "library"  # <frozen ...>, a dataclass's generated <string>
    path = os.path.realpath(filename)
    if path.startswith(_EXERCISES + os.sep):
        return "checker"
    if path.startswith(_PACKAGE + os.sep) or path.startswith(_INSTALLED):
        return "library"
    return "learner"


def _functions(obj) -> List[Callable]:
    """The plain functions whose code runs when ``obj`` is used: a function itself, or every
    method, property and static/class method a class defines."""
    if isinstance(obj, type):
        found = []
        for value in vars(obj).values():
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            elif isinstance(value, property):
                value = value.fget
            if inspect.isfunction(value):
                found.append(value)
        return found
    obj = inspect.unwrap(obj)
    return [obj] if inspect.isfunction(obj) else []


def _name(obj) -> str:
    return getattr(obj, "__qualname__", getattr(obj, "__name__", repr(obj)))


def identity(answer, forbidden) -> Optional[str]:
    """How ``answer`` is one of ``forbidden`` ('is', 'subclasses'), with its name; else None."""
    seen = answer
    for _ in range(8):  # partial(partial(f)), a bound method, @wraps ...
        if isinstance(seen, functools.partial):
            seen = seen.func
        elif inspect.ismethod(seen):
            seen = seen.__func__
        elif hasattr(seen, "__wrapped__"):
            seen = seen.__wrapped__
        else:
            break
        if any(seen is f for f in forbidden):
            break
    for f in forbidden:
        if seen is f or answer is f:
            return f"is the library's `{_name(f)}` itself"
        if isinstance(f, type) and any(seen is g for g in _functions(f)):
            return f"is the library's `{_name(seen)}` itself"
        if isinstance(f, type) and isinstance(answer, type) and issubclass(answer, f):
            return f"subclasses the library's `{_name(f)}`"
    return None


class CallWatch:
    """While active, record which forbidden functions the learner's code called."""

    def __init__(self, forbidden) -> None:
        self.codes: Dict[object, str] = {}
        for obj in forbidden:
            for fn in _functions(obj):
                self.codes[fn.__code__] = _name(obj)
        self.called: List[str] = []
        self._previous = None

    def _learner_called(self, frame) -> bool:
        caller = frame.f_back
        while caller is not None:
            kind = _kind(caller.f_code.co_filename)
            if kind == "checker":
                return False
            if kind == "learner":
                return True
            caller = caller.f_back
        return False

    def _hook(self, frame, event, arg):
        if event == "call" and frame.f_code in self.codes:
            name = self.codes[frame.f_code]
            if name not in self.called and self._learner_called(frame):
                self.called.append(name)
        if callable(self._previous):
            self._previous(frame, event, arg)

    def __enter__(self) -> "CallWatch":
        self._previous = sys.getprofile()
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(self._previous)


def verdict(answers: Tuple, forbidden, called: List[str]) -> List[str]:
    """Why these answers are the library's work (empty when they are the learner's own)."""
    reasons = []
    for answer in answers:
        how = identity(answer, forbidden)
        if how:
            reasons.append(f"your answer {how}")
    reasons += [f"your code calls the library's `{name}`" for name in called]
    return reasons


def refuses(*forbidden, rule: str):
    """Decorate a checker: the learner's answers (its positional arguments) may not be, subclass
    or call any of ``forbidden`` (library functions, methods or classes). ``rule`` is the
    exercise's own wording, e.g. "without calling `sinusoidal_table`"."""

    def decorate(checker: Callable[..., Feedback]) -> Callable[..., Feedback]:
        @functools.wraps(checker)
        def wrapped(*answers, **kwargs) -> Feedback:
            with CallWatch(forbidden) as watch:
                feedback = checker(*answers, **kwargs)
            for reason in verdict(answers, forbidden, watch.called):
                feedback.fail(f"the exercise says {rule}: {reason}")
            return feedback

        wrapped.forbidden = forbidden  # type: ignore[attr-defined]
        wrapped.rule = rule  # type: ignore[attr-defined]
        return wrapped

    return decorate
