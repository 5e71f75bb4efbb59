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
import re
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


def _unwrapped(obj, stop=()):
    """What ``obj`` runs: through ``functools.partial``, bound methods and ``__wrapped__``
    (@wraps), stopping early at any object of ``stop``."""
    seen = obj
    for _ in range(8):  # partial(partial(f)), a bound method, @wraps ...
        if isinstance(seen, functools.partial):
            seen = seen.func
        elif inspect.ismethod(seen):
            seen = seen.__func__
        elif hasattr(seen, "__wrapped__") and not isinstance(seen, type):
            seen = seen.__wrapped__
        else:
            break
        if any(seen is f for f in stop):
            break
    return seen


def identity(answer, forbidden) -> Optional[str]:
    """How ``answer`` is one of ``forbidden`` ('is', 'subclasses'), with its name; else None."""
    seen = _unwrapped(answer, forbidden)
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


# The checkers' own answers --------------------------------------------------------------------
# Each checker module holds right answers (``CHECKS``' makers return them, for the tests) and
# reference computations (``*_reference``) that its checks use. A learner's answer may not be
# one of them, nor call one: ``ex08.right_greedy()`` passed to ``ex08.check_greedy`` is refused.
_REFERENCE = re.compile(r"(?:^|\.)_?\w*reference\w*(?:\.|$)")
TESTS_GIVE_RIGHT_ANSWERS = False  # set by the project's tests: they check the checkers with them


@functools.lru_cache(maxsize=4096)
def _reference_name(code) -> Optional[str]:
    """The name to report when ``code`` is one of the checkers' ``*_reference``s, else None."""
    if _kind(code.co_filename) == "checker" and _REFERENCE.search(code.co_qualname):
        return code.co_qualname.split(".<locals>")[0]
    return None


def _codes(obj) -> Dict[object, str]:
    """The code objects (with a name to report) of the checker's functions that run when
    ``obj`` is used: a function, a class (its methods, inherited ones too) or an instance."""
    seen = _unwrapped(obj)
    if inspect.isfunction(seen):
        functions = [seen]
    else:
        cls = seen if isinstance(seen, type) else type(seen)
        functions = [f for k in cls.__mro__ for f in _functions(k)]
    return {
        f.__code__: f.__code__.co_qualname.split(".<locals>")[0]
        for f in functions
        if _kind(f.__code__.co_filename) == "checker"
    }


def guard(namespace: dict) -> None:
    """Wrap every ``check_*`` function of a checker module (its ``globals()``) so that an
    answer that is, or calls, one of the module's right answers or references says "not
    yet". ``CHECKS`` keeps the unwrapped checkers (the tests give them the right answers)."""
    answers: Dict[object, str] = {}

    def own_answers() -> Dict[object, str]:
        if not answers:  # once, at the first check
            for _, make_right in namespace.get("CHECKS", {}).values():
                answers.update(_codes(make_right()))
        return answers

    for name, checker in list(namespace.items()):
        if name.startswith("check_") and inspect.isfunction(checker):
            namespace[name] = _guarded(checker, own_answers)


def _guarded(checker: Callable[..., Feedback], own_answers) -> Callable[..., Feedback]:
    @functools.wraps(checker)
    def wrapped(*answers, **kwargs) -> Feedback:
        if TESTS_GIVE_RIGHT_ANSWERS:
            return checker(*answers, **kwargs)
        known = own_answers()

        def name_of(code) -> Optional[str]:  # called on every call while the check runs
            return known.get(code) or _reference_name(code)

        used = [n for a in (*answers, *kwargs.values()) for c in _codes(a) if (n := name_of(c))]
        previous = sys.getprofile()

        def hook(frame, event, arg):
            if event == "call" and frame.f_back is not None:
                name = name_of(frame.f_code)
                if name and _kind(frame.f_back.f_code.co_filename) == "learner":
                    used.append(name)
            if callable(previous):
                previous(frame, event, arg)

        sys.setprofile(hook)
        try:
            feedback = checker(*answers, **kwargs)
        finally:
            sys.setprofile(previous)
        if used and isinstance(feedback, Feedback):
            feedback.fail(
                f"your answer uses the checker's own answer `{used[0]}`: write your own code"
            )
        return feedback

    return wrapped
