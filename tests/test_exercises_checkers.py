"""Every exercise checker, with a right answer and with answers that go wrong in the ways a
learner's code goes wrong: the right one passes, the others get "not yet" with a reason, and
no checker ever raises."""

import importlib
import pkgutil

import pytest
import torch

import transformer_lib.exercises as exercises

MODULES = [
    importlib.import_module(f"transformer_lib.exercises.{m.name}")
    for m in pkgutil.iter_modules(exercises.__path__)
    if m.name.startswith("ex") or m.name == "capstone"
]
CHECKS = [
    (m.__name__.split(".")[-1], name, pair) for m in MODULES for name, pair in m.CHECKS.items()
]


def double(value):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.double()
    if isinstance(value, tuple):
        return tuple(double(v) for v in value)
    return value


def wrong_answers(right):
    """Answers that raise at once, on a later call, return nothing, return a string."""
    if isinstance(right, type):

        class Raises(right):
            def __init__(self, *args, **kwargs):
                raise RuntimeError("a bug in __init__")

        class ForwardRaises(right):
            def forward(self, *args, **kwargs):
                raise ValueError("a bug in forward")

        class ReturnsNone(right):
            def forward(self, *args, **kwargs):
                return None

        return {"raises": Raises, "forward raises": ForwardRaises, "returns None": ReturnsNone}
    calls = []

    def later(*args, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            raise IndexError("fails on the second call")
        return right(*args, **kwargs)

    def raises(*args, **kwargs):
        raise RuntimeError("a bug")

    later.called_twice = lambda: len(calls) > 1
    return {
        "raises": raises,
        "raises later": later,
        "returns None": lambda *a, **k: None,
        "returns a str": lambda *a, **k: "an answer",
    }


@pytest.mark.parametrize("module, name, pair", CHECKS, ids=[f"{m}.{n}" for m, n, _ in CHECKS])
def test_checker_passes_the_right_answer_and_never_raises_on_a_wrong_one(module, name, pair):
    checker, make_right = pair
    right = make_right()
    assert checker(right), f"{module}.{name} refuses a right answer"
    for kind, wrong in wrong_answers(right).items():
        feedback = checker(wrong)
        if kind == "raises later" and not getattr(wrong, "called_twice", lambda: True)():
            continue  # a checker that calls the answer once never meets the later failure
        assert not feedback, f"{module}.{name} passes an answer that {kind}"
        assert "not yet" in str(feedback)
    if not isinstance(right, type):
        checker(lambda *a, **k: double(right(*a, **k)))  # float64 out: an answer, no crash


@pytest.mark.learner
@pytest.mark.parametrize("module, name, pair", CHECKS, ids=[f"{m}.{n}" for m, n, _ in CHECKS])
def test_a_checker_refuses_its_own_right_answer_given_as_the_learners(module, name, pair):
    """The notebook's checker (the module's ``check_*``) says "not yet" to the right answer
    the module holds for the tests, passed as it is or called from the learner's code."""
    checker = getattr(
        importlib.import_module(f"transformer_lib.exercises.{module}"), pair[0].__name__
    )
    right = pair[1]()
    if isinstance(right, type):
        borrowed = type("Mine", (right,), {})  # a subclass that writes nothing of its own
    else:
        borrowed = lambda *a, **k: right(*a, **k)  # noqa: E731
    for answer in (right, borrowed):
        feedback = checker(answer)
        assert not feedback and "the checker's own answer" in str(feedback), f"{module}.{name}"
