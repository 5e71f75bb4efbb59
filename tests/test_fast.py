"""transformer_lib.fast.accelerate: what it swaps, what it keeps, and that the teaching
modules know nothing of it."""

import inspect
import re
from pathlib import Path

import pytest
import torch
from torch import nn

from transformer_lib import MultiHeadAttention, PositionwiseFeedForward, Transformer
from transformer_lib.fast import FastDropout, FastFeedForward, FastMultiHeadAttention, accelerate

PACKAGE = Path(__file__).resolve().parent.parent / "transformer_lib"
TEACHING = (
    "embedding",
    "positional",
    "masks",
    "attention",
    "feedforward",
    "residual",
    "encoder",
    "decoder",
    "model",
)


@pytest.mark.parametrize("name", TEACHING)
def test_teaching_modules_hold_no_speed_code(name):
    source = (PACKAGE / f"{name}.py").read_text()
    for word in (
        "cpu_kernels",
        "compiled",
        "of_relu",
        "kernels",
        "from .fast",
        "import fast",
        "transformer_lib.fast",
    ):
        assert word not in source, f"{name}.py mentions {word!r}"
    assert not re.search(r"^from \.dropout|^from \.\w+ import .*Dropout", source, re.M)


def test_the_speed_package_uses_only_public_names_of_the_lesson():
    """No underscore name of another module (``._check_inputs``, ``from ..x import _y``) in
    transformer_lib/fast, and the fast attention overrides only the layer's public hook
    (``fused_attention``), not its forward pass with a copy of its logic. (PyTorch's own
    ``torch._inductor``, ``torch._dynamo``: Inductor's settings live there, and they are not
    the lesson's.)"""
    for path in sorted((PACKAGE / "fast").glob("*.py")):
        source = path.read_text()
        assert not re.findall(r"(?<!\btorch)\._[a-z]\w*", source), path.name
        assert not re.search(r"^from \.\.\w* import .*\b_[a-z]", source, re.M), path.name
    overridden = {k for k in vars(FastMultiHeadAttention) if not k.startswith("__")}
    assert {"forward", "combine"} & overridden == set()
    assert "fused_attention" in overridden
    assert "fused_attention" in vars(MultiHeadAttention)  # the hook the lesson offers
    for name, cls in (("FastFeedForward", FastFeedForward), ("FastDropout", FastDropout)):
        assert not {k for k in vars(cls) if k.startswith("_") and not k.startswith("__")}, name


def test_the_feed_forward_reads_like_the_paper():
    body = inspect.getsource(PositionwiseFeedForward.forward)
    assert "return self.w_2(self.dropout(torch.relu(self.w_1(x))))" in body
    assert len([line for line in body.splitlines() if line.strip()]) == 2


def test_accelerate_swaps_the_layers_in_place_and_keeps_every_weight(tiny):
    model = Transformer(tiny)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    kinds = {type(m) for m in model.modules()}
    assert nn.Dropout in kinds and MultiHeadAttention in kinds
    assert accelerate(model, kernels=False) is model
    kinds = {type(m) for m in model.modules()}
    assert {FastDropout, FastFeedForward, FastMultiHeadAttention} <= kinds
    assert not {nn.Dropout, PositionwiseFeedForward, MultiHeadAttention} & kinds
    after = model.state_dict()
    assert list(after) == list(before)
    assert all(torch.equal(after[k], before[k]) for k in before)
    assert all(not m.kernels for m in model.modules() if hasattr(m, "kernels"))
    accelerate(model, kernels=False)  # again: nothing changes
    assert {type(m) for m in model.modules()} == kinds


def test_an_accelerated_model_computes_the_same_function(tiny):
    """Evaluation (no dropout): the same logits; training without dropout: the same loss
    and gradients (the paths differ only in the dropout masks they draw)."""
    torch.manual_seed(0)
    plain = Transformer(tiny)
    fast = accelerate(Transformer(tiny), kernels=False)
    fast.load_state_dict(plain.state_dict())
    src, tgt = torch.randint(3, 50, (4, 9)), torch.randint(3, 50, (4, 7))
    src[1, 6:] = tiny.pad_id
    torch.testing.assert_close(fast.eval()(src, tgt), plain.eval()(src, tgt))
    losses = []
    for model in (plain.train(), fast.train()):  # tiny fixture: P_drop = 0
        loss = model(src, tgt).logsumexp(-1).mean()
        losses.append((loss, torch.autograd.grad(loss, list(model.parameters()))))
    torch.testing.assert_close(losses[0][0], losses[1][0])
    for a, b in zip(losses[0][1], losses[1][1]):
        torch.testing.assert_close(a, b)


def test_accelerated_dropout_keeps_the_rate_and_the_expectation():
    drop = accelerate(nn.Dropout(0.25), kernels=False).train()
    y = drop(torch.ones(400_000))
    assert abs((y == 0).float().mean().item() - 0.25) < 5e-3
    assert abs(y.mean().item() - 1.0) < 1e-2


def test_accelerate_rejects_what_it_cannot_use():
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        accelerate("a model")
    with pytest.raises(TypeError, match="kernels must be True, False or None"):
        accelerate(nn.Linear(2, 2), kernels=1)
