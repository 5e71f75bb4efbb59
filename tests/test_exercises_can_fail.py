"""Every checker of every notebook can fail: a forgotten `return` (None), an exception in
the learner's code or a non-function is "not yet" with the reason, never "correct" and
never an exception out of the checker."""

import importlib
import inspect
import pkgutil

import pytest
import torch

import transformer_lib.exercises as exercises


def all_checkers():
    for info in pkgutil.iter_modules(exercises.__path__):
        module = importlib.import_module(f"{exercises.__name__}.{info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("check_") and fn.__module__ == module.__name__:
                yield pytest.param(fn, id=f"{info.name}.{name}")


def forgot_return(*args, **kwargs):
    pass


def raises(*args, **kwargs):
    raise KeyError("oops")


CHECKERS = list(all_checkers())


def test_there_are_checkers_for_every_notebook():
    modules = {p.id.split(".")[0] for p in CHECKERS}
    assert len(CHECKERS) >= 20 and len(modules) >= 8


@pytest.mark.parametrize("checker", CHECKERS)
@pytest.mark.parametrize(
    "learner,reason",
    [
        (forgot_return, "returned None"),
        (raises, "raised KeyError"),
        ("not a function", "pass your function"),
    ],
)
def test_checker_says_not_yet_with_the_reason(checker, learner, reason):
    n_args = sum(
        p.default is inspect.Parameter.empty for p in inspect.signature(checker).parameters.values()
    )
    feedback = checker(*[learner] * n_args)
    assert not feedback.passed and "not yet" in str(feedback)
    assert reason in str(feedback)


WRONG_ANSWERS = {
    "a string": lambda *a, **k: "text",
    "a one-element tensor": lambda *a, **k: torch.zeros(1),
    "an int64 tensor of another shape": lambda *a, **k: torch.zeros(2, 3, dtype=torch.long),
    "a tuple": lambda *a, **k: (torch.zeros(1), torch.zeros(1)),
    "a float": lambda *a, **k: 1.5,
}


@pytest.mark.parametrize("checker", CHECKERS)
@pytest.mark.parametrize("answer", sorted(WRONG_ANSWERS))
def test_checker_says_not_yet_to_a_wrong_type_or_shape_without_raising(checker, answer):
    n_args = sum(
        p.default is inspect.Parameter.empty for p in inspect.signature(checker).parameters.values()
    )
    feedback = checker(*[WRONG_ANSWERS[answer]] * n_args)  # must not raise
    assert not feedback.passed and "not yet" in str(feedback)
    assert len(str(feedback).splitlines()) >= 2  # with a reason
