"""transformer_lib.fast computes what the plain modules compute, faster: accelerate() swaps
layers in place and keeps every weight; the dropout masks keep their law and are the
documented SplitMix64 masks; the compiled C++ kernels (where a compiler can build them) give
the same outputs and gradients as the plain paths; torch.compile traces a training step as
one graph, and compile_model runs with eager's dropout masks."""

import math
import shutil
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch._dynamo.utils import counters

from transformer_lib import fast
from transformer_lib import train as train_cli
from transformer_lib.attention import MultiHeadAttention
from transformer_lib.config import TransformerConfig
from transformer_lib.fast import FastDropout, FastFeedForward, FastMultiHeadAttention, accelerate
from transformer_lib.fast import kernels as cpu_kernels
from transformer_lib.fast.attention import MAX_SCORES
from transformer_lib.fast.dropout import compiled_dropout, draw_key, keep_mask, random_words
from transformer_lib.fast.dropout import relu_dropout
from transformer_lib.fast.inductor import relu_backward
from transformer_lib.feedforward import PositionwiseFeedForward
from transformer_lib.masks import causal_mask, padding_mask
from transformer_lib.model import Transformer

KERNELS = fast.kernels_available()  # None where they can be built (here, now)
needs_kernels = pytest.mark.skipif(KERNELS is not None, reason=f"no compiled kernels: {KERNELS}")
needs_mkl = pytest.mark.skipif(
    KERNELS is not None or not cpu_kernels.attention_available(),
    reason="no compiled attention kernel (it needs MKL's batched matrix multiply)",
)
MASK64 = 2**64 - 1


def splitmix64(key: int, w: int) -> int:
    """The w-th output (from 0) of SplitMix64 started at key, an unsigned 64-bit int."""
    z = (key + (w + 1) * 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def splitmix64_mask(key: int, n: int, p: float) -> torch.Tensor:
    """The documented mask in plain Python: element i takes the (i mod 4)-th 16 bits of
    output i // 4 and is kept when they, read signed, are >= round(p 2^16) - 2^15."""
    keep = []
    for i in range(n):
        bits = (splitmix64(key & MASK64, i // 4) >> (16 * (i % 4))) & 0xFFFF
        keep.append((bits - 2**16 if bits >= 2**15 else bits) >= round(p * 2**16) - 2**15)
    return torch.tensor(keep)


def close(a, b, tol=1e-5):
    torch.testing.assert_close(a, b, rtol=tol, atol=tol)


# accelerate --------------------------------------------------------------------------------
def test_accelerate_swaps_the_layers_in_place_and_keeps_every_weight(tiny):
    model = Transformer(tiny)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert accelerate(model, kernels=False) is model
    kinds = {type(m) for m in model.modules()}
    assert {FastDropout, FastFeedForward, FastMultiHeadAttention} <= kinds
    assert not {nn.Dropout, PositionwiseFeedForward, MultiHeadAttention} & kinds
    after = model.state_dict()
    assert list(after) == list(before) and all(torch.equal(after[k], before[k]) for k in before)
    assert not any(m.kernels for m in model.modules() if hasattr(m, "kernels"))
    accelerate(model, kernels=False)  # again: nothing changes
    assert {type(m) for m in model.modules()} == kinds


@pytest.mark.parametrize("kernels", [False, pytest.param(True, marks=needs_kernels)])
@pytest.mark.parametrize("variant", [{}, dict(norm_first=True, d_k=12)])
def test_an_accelerated_model_computes_the_same_function(kernels, variant):
    """Evaluation: the same logits; training without dropout: the same loss and gradients
    (with dropout the masks differ from nn.Dropout's)."""
    c = TransformerConfig.tiny(50, P_drop=0.0, **variant)
    plain = Transformer(c)
    quick = accelerate(Transformer(c), kernels=kernels)
    quick.load_state_dict(plain.state_dict())
    src, tgt = torch.randint(3, 50, (4, 9)), torch.randint(3, 50, (4, 7))
    src[1, 6:] = c.pad_id
    close(quick.eval()(src, tgt), plain.eval()(src, tgt))
    results = []
    for model in (plain.train(), quick.train()):
        loss = model(src, tgt).logsumexp(-1).mean()
        results.append([loss, *torch.autograd.grad(loss, list(model.parameters()))])
    for a, b in zip(*results):
        close(a, b, 1e-4)


@pytest.mark.parametrize("kernels", [False, pytest.param(True, marks=needs_kernels)])
def test_dropout_masks_keep_with_probability_one_minus_p_and_rescale(kernels):
    drop = accelerate(nn.Dropout(0.1), kernels=kernels).train()
    x = torch.full((2000, 500), 3.0, requires_grad=True)
    y = drop(x)
    kept = y != 0
    rate = round(0.1 * 2**16) / 2**16  # p is a multiple of 2^-16
    assert abs(1 - kept.float().mean().item() - rate) < 6 * math.sqrt(rate * (1 - rate) / x.numel())
    close(y[kept], torch.full_like(y[kept], 3.0 / 0.9))
    per_column = kept.float().mean(dim=0)  # no position is favoured
    assert per_column.min() > 0.85 and per_column.max() < 0.95
    pairs = (kept[:, :-1] & kept[:, 1:]).float().mean().item()  # neighbours independent
    assert abs(pairs - (1 - rate) ** 2) < 3e-3
    y.sum().backward()  # the same mask in the gradient
    close(x.grad, kept.float() / 0.9)
    assert not torch.equal(drop(x) != 0, kept)  # a fresh mask each call
    assert drop.eval()(x) is x
    assert drop.train()(x.detach().bfloat16()).dtype == torch.bfloat16


def test_keep_mask_is_the_documented_splitmix64_mask_keyed_by_the_seeded_generator():
    for key in (0, 12345, -1, -(2**63)):
        words = [w & MASK64 for w in random_words(key, 6).tolist()]
        assert words == [splitmix64(key & MASK64, w) for w in range(6)]
        for n, p in ((1001, 0.3), (24, 0.5)):  # 1001: a last word half used
            assert torch.equal(
                keep_mask(torch.Size((n,)), p, key=key) != 0, splitmix64_mask(key, n, p)
            )
    torch.manual_seed(7)
    key = draw_key()
    torch.manual_seed(7)
    assert torch.equal(
        keep_mask(torch.Size((5, 40)), 0.2), keep_mask(torch.Size((5, 40)), 0.2, key=key)
    )
    masks = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        masks.append(keep_mask(torch.Size((64, 48, 256)), 0.1, key=3))
    assert torch.equal(*masks)  # the same on one thread or two


def test_relu_dropout_is_dropout_of_relu_with_the_same_mask_and_gradient_keeping_no_mask():
    x = torch.randn(50, 40, requires_grad=True)
    torch.manual_seed(3)
    quick = relu_dropout(x, 0.3, kernels=False)
    assert len(quick.grad_fn.saved_tensors) == 1  # its output only
    x2 = x.detach().clone().requires_grad_()
    torch.manual_seed(3)
    slow = x2.relu() * keep_mask(x2.shape, 0.3)
    torch.testing.assert_close(quick, slow, rtol=0, atol=0)
    g = torch.randn_like(quick)
    quick.backward(g)
    slow.backward(g)
    torch.testing.assert_close(x.grad, x2.grad, rtol=0, atol=0)


# the compiled kernels ----------------------------------------------------------------------
@needs_kernels
@pytest.mark.parametrize("shape", [(7,), (1001,), (3, 1025)])
def test_the_kernel_makes_the_pure_pytorch_mask_and_takes_one_draw(shape):
    x = torch.randn(shape)
    for p in (0.1, 0.5, 2**-16):
        torch.manual_seed(9)
        pure = x * keep_mask(x.shape, p)
        torch.manual_seed(9)
        assert torch.equal(compiled_dropout(x, p), pure)
    torch.manual_seed(9)
    keep_mask(x.shape, 0.1)
    after = torch.rand(3)
    torch.manual_seed(9)
    compiled_dropout(x, 0.1)
    assert torch.equal(torch.rand(3), after)  # one draw from the generator each
    ones = torch.ones(shape, requires_grad=True)
    y = compiled_dropout(ones, 0.4)
    g = torch.randn_like(y)
    y.backward(g)  # backward makes the same mask again
    torch.testing.assert_close(ones.grad, g * y.detach(), rtol=0, atol=0)


@needs_kernels
def test_the_kernel_s_dropout_passes_gradcheck():
    x = torch.randn(6, 9, dtype=torch.float64, requires_grad=True)

    def seeded(t):
        torch.manual_seed(11)  # the same mask at every evaluation
        return compiled_dropout(t, 0.25)

    assert torch.autograd.gradcheck(seeded, (x,))


@needs_kernels
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_the_feed_forward_kernel_equals_the_plain_path(layout):
    ffn = accelerate(PositionwiseFeedForward(24, 80, dropout=0.3).train(), kernels=True)
    x0 = torch.randn(3, 7, 24) if layout == "contiguous" else torch.randn(7, 3, 24).transpose(0, 1)
    results = []
    for forward in (ffn, lambda x: ffn.w_2(relu_dropout(ffn.w_1(x), 0.3, kernels=False))):
        x = x0.clone().requires_grad_()
        torch.manual_seed(5)
        y = forward(x)
        ffn.zero_grad()
        y.backward(torch.linspace(-1, 1, y.numel()).view(y.shape))
        results.append([y.detach(), x.grad] + [p.grad.clone() for p in ffn.parameters()])
    assert not torch.allclose(results[0][0], ffn.eval()(x0))  # dropout was at work
    for a, b in zip(*results):
        close(a, b)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # under autocast: the plain path
        assert ffn.train()(x0).grad_fn.name() != "_CompiledFeedForwardBackward"


def layer_and_grads(layer, x, memory, mask, need_weights=False):
    out, _ = layer(x, memory, mask, need_weights=need_weights)
    inputs = [x] + ([memory] if memory is not None else []) + list(layer.parameters())
    weights = torch.linspace(-2, 2, out.numel()).view(out.shape)  # a gradient of every sign
    return [out.detach()] + list(torch.autograd.grad(out, inputs, weights))


def attention_masks(B, T, S):
    per_query = torch.rand(B, 1, T, S, generator=torch.Generator().manual_seed(3)) > 0.4
    per_query[1, 0, 2] = False  # a query that sees nothing
    lengths = torch.tensor([S, S - 2, 0, S - 3])
    return {
        "none": None,
        "padding": torch.arange(S)[None, None, None, :] < lengths[:, None, None, None],
        "per query": per_query,
        "per head": torch.rand(B, 4, T, S, generator=torch.Generator().manual_seed(4)) > 0.3,
        "causal": causal_mask(T) if T == S else None,
    }


@pytest.fixture
def attention_calls(monkeypatch):
    calls, real = [], cpu_kernels.load().attention_forward
    monkeypatch.setattr(
        cpu_kernels.load(), "attention_forward", lambda *a: calls.append(1) or real(*a)
    )
    return calls


@needs_mkl
@pytest.mark.parametrize("mask_kind", ["none", "padding", "per query", "per head", "causal"])
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_the_attention_kernel_equals_the_fused_and_explicit_paths(
    attention_calls, mask_kind, cross
):
    B, T, S, D = 4, 6, (9 if cross else 6), 32
    layer = MultiHeadAttention(D, 4).train()
    x0, m0 = torch.randn(B, T, D), torch.randn(B, S, D)
    mask = attention_masks(B, T, S)[mask_kind]
    results = []
    for kernels, need_weights in ((True, False), (False, False), (False, True)):
        accelerate(layer, kernels=kernels)
        x, memory = x0.clone().requires_grad_(), m0.clone().requires_grad_() if cross else None
        results.append(layer_and_grads(layer, x, memory, mask, need_weights))
    assert len(attention_calls) == 1
    for got, fused, explicit in zip(*results):
        assert torch.isfinite(got).all()
        close(got, fused)
        close(got, explicit)


@needs_mkl
def test_the_attention_kernel_runs_only_where_it_applies(attention_calls, monkeypatch):
    layer = accelerate(MultiHeadAttention(16, 2).train(), kernels=True)
    x = torch.randn(2, 5, 16)

    def calls(*args, **kwargs) -> int:
        before = len(attention_calls)
        layer(*args, **kwargs)
        return len(attention_calls) - before

    assert calls(x) == 1 and calls(x, need_weights=True) == 0
    cache = {}
    assert calls(x, cache=cache) == 1  # a first step: keys are the projection's
    assert calls(x[:, :1], cache=cache) == 0  # then a cache's past keys
    layer.double()
    assert calls(x.double()) == 0  # float32 only
    layer.float().dropout = 0.1
    assert calls(x) == 0  # dropout on the weights in training
    layer.eval()  # no dropout in evaluation: the kernel
    side = int(math.isqrt(MAX_SCORES))
    assert calls(torch.randn(1, side, 16)) == 1 and calls(torch.randn(1, side + 1, 16)) == 0
    monkeypatch.setattr(cpu_kernels, "attention_available", lambda: False)
    assert calls(x) == 0


@needs_mkl
def test_the_attention_kernel_with_a_decoding_cache_and_under_autocast():
    plain = MultiHeadAttention(16, 4).eval()
    quick = accelerate(MultiHeadAttention(16, 4), kernels=True).eval()
    quick.load_state_dict(plain.state_dict())
    x = torch.randn(2, 7, 16)
    outputs = []
    for layer in (plain, quick):
        cache = {}
        first, _ = layer(x[:, :5], mask=causal_mask(5), cache=cache)
        rest = [layer(x[:, t : t + 1], cache=cache)[0] for t in (5, 6)]
        outputs.append(torch.cat([first, *rest], dim=1))
    close(outputs[1], outputs[0])
    close(outputs[1], plain(x, mask=causal_mask(7))[0])
    mask = padding_mask(torch.tensor([[5] * 7, [5] * 4 + [0] * 3]), 0)
    results = []
    for kernels in (True, False):
        accelerate(quick.train(), kernels=kernels)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            results.append(layer_and_grads(quick, x.clone().requires_grad_(), None, mask))
    assert results[0][0].dtype == torch.bfloat16
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-2, atol=1e-2)


@needs_kernels
def test_a_training_step_is_the_same_with_and_without_the_kernels():
    """Same masks, so the same loss and gradients, up to rounding."""
    c = TransformerConfig.tiny(50, d_model=64, d_ff=128, N=2, P_drop=0.3)
    model = Transformer(c).train()
    src, tgt = torch.randint(3, 50, (8, 12)), torch.randint(3, 50, (8, 13))
    src[1:, 9:], tgt[2:, 10:] = c.pad_id, c.pad_id
    results = []
    for kernels in (False, True):
        accelerate(model, kernels=kernels)
        torch.manual_seed(1)
        loss = F.cross_entropy(model(src, tgt[:, :-1]).flatten(0, 1), tgt[:, 1:].flatten())
        results.append([loss, *torch.autograd.grad(loss, list(model.parameters()))])
    torch.testing.assert_close(results[1][0], results[0][0], rtol=1e-6, atol=0)
    for a, b in zip(results[1][1:], results[0][1:]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_without_a_compiler_the_kernels_fail_at_once_or_are_left_off(
    monkeypatch, tmp_path, capsys, tiny_dates
):
    monkeypatch.setattr(cpu_kernels, "_module", None)
    monkeypatch.setattr(cpu_kernels.shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "ninja", None)  # `import ninja` fails too
    layer = MultiHeadAttention(16, 2)
    with pytest.raises(RuntimeError, match="ninja|compiler"):
        accelerate(layer, kernels=True)
    assert type(layer) is MultiHeadAttention and not accelerate(layer).kernels
    flags = [f for f in tiny_dates if f != "--no-compiled-kernels"] + ["--steps", "1"]
    with pytest.raises(SystemExit):
        train_cli.main([*flags, "--compiled-kernels", "--out", str(tmp_path / "a")])
    assert "--compiled-kernels" in capsys.readouterr().err
    assert train_cli.main([*flags, "--out", str(tmp_path / "b")]) == 0
    assert "compiled CPU kernels: off" in capsys.readouterr().out


# torch.compile -------------------------------------------------------------------------------
def test_a_training_step_compiles_into_one_graph_and_matches_eager():
    """dynamo traces forward + loss once (dynamic shapes: batches of other lengths reuse the
    graph, no recompilation); the backward runs through the compiled graph."""
    V = 30
    model = Transformer(TransformerConfig.tiny(V, N=1, d_model=16, d_ff=32, h=2, P_drop=0.0))

    def loss_of(src, tgt):
        return F.cross_entropy(model(src, tgt).flatten(0, 1), tgt.flatten(), ignore_index=0)

    torch._dynamo.reset()
    counters.clear()
    step = torch.compile(loss_of, backend="eager", dynamic=True)
    for i, (S, T) in enumerate([(7, 6), (9, 4), (5, 8)]):
        src, tgt = torch.randint(1, V, (3, S)), torch.randint(1, V, (3, T))
        src[0, -2:], tgt[1, -1:] = 0, 0
        with torch.compiler.set_stance("fail_on_recompile" if i else "default"):
            loss = step(src, tgt)
        loss.backward()
        close(loss.detach(), loss_of(src, tgt).detach())
    assert dict(counters["graph_break"]) == {} and counters["stats"]["unique_graphs"] == 1
    assert all(p.grad is not None for p in model.parameters())


def test_compile_model_on_a_cpu_draws_eager_s_dropout_masks():
    # Inductor for real (C++ code, built here); fallback_random: the same generator, the
    # same masks as the eager model, so the same output and gradients
    if shutil.which("c++") is None:
        pytest.skip("Inductor's CPU code needs a C++ compiler")
    eager = PositionwiseFeedForward(16, 64, dropout=0.5).train()
    compiled = PositionwiseFeedForward(16, 64, dropout=0.5).train()
    compiled.load_state_dict(eager.state_dict())
    x = torch.randn(3, 7, 16)
    torch._dynamo.reset()
    step = fast.compile_model(compiled)
    for seed in (1, 2):
        torch.manual_seed(seed)
        want = eager(x)
        torch.manual_seed(seed)
        got = step(x)
        close(got, want)
        want.square().sum().backward()
        got.square().sum().backward()
    for p, q in zip(eager.parameters(), compiled.parameters()):
        close(q.grad, p.grad)
    y = torch.randn(64, 33).clamp_min(0)
    grad = torch.randn(64, 33)
    assert torch.equal(relu_backward(grad, y, 0.0), torch.ops.aten.threshold_backward(grad, y, 0.0))


def test_the_training_command_with_compile_takes_eager_s_steps(tmp_path, capsys, tiny_dates):
    flags = [*tiny_dates, "--steps", "3", "--dropout", "0"]  # eager's dropout is accelerate's
    assert train_cli.main([*flags, "--out", str(tmp_path / "eager")]) == 0
    assert train_cli.main([*flags, "--out", str(tmp_path / "c"), "--compile", "eager"]) == 0
    losses = [
        torch.load(tmp_path / run / "checkpoint.pt", weights_only=True)["history"]["loss"]
        for run in ("eager", "c")
    ]
    close(torch.tensor(losses[1]), torch.tensor(losses[0]))
