"""The compiled CPU kernels (transformer_lib.fast.kernels): the dropout mask's law, its
generator, forward/backward agreement, the feed-forward and attention fast paths against the
plain ones, accelerate(kernels=...) and the training command line's use of them. Builds the
kernels once (~30 s, then cached)."""

import math
import os
import shutil
import time
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from transformer_lib import (
    MultiHeadAttention,
    PositionwiseFeedForward,
    Transformer,
    TransformerConfig,
)
from transformer_lib.cli import train_command as train_cli
from transformer_lib.fast import FastDropout, accelerate
from transformer_lib.fast import kernels as cpu_kernels
from transformer_lib.fast.attention import MAX_SCORES
from transformer_lib.fast.dropout import (
    compiled_dropout,
    compiled_relu_dropout,
    keep_mask,
    relu_dropout,
)

from splitmix64 import splitmix64_mask

pytestmark = pytest.mark.skipif(
    shutil.which("c++") is None, reason="no C++ compiler: the compiled kernels cannot be built"
)


@pytest.fixture(scope="module", autouse=True)
def kernels():
    return cpu_kernels.load()  # a failed build fails every test here


def test_the_mask_is_splitmix64_keyed_by_one_draw_of_torchs_generator():
    torch.manual_seed(7)
    key = int(torch.empty((), dtype=torch.int64).random_())
    torch.manual_seed(7)
    y = compiled_dropout(torch.ones(1001), 0.3)  # 1001: a last word half used
    assert torch.equal(y != 0, splitmix64_mask(key, 1001, 0.3))


def test_keeps_with_probability_one_minus_p_rescales_and_favours_no_position():
    x = torch.full((2000, 500), 3.0, requires_grad=True)
    y = compiled_dropout(x, 0.1)
    kept = y != 0
    rate = round(0.1 * 2**16) / 2**16
    sd = math.sqrt(rate * (1 - rate) / x.numel())
    assert abs(1 - kept.float().mean().item() - rate) < 6 * sd
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 3.0 / 0.9))
    per_column = kept.float().mean(dim=0)
    assert per_column.min() > 0.85 and per_column.max() < 0.95
    # the four slices of one 64-bit word, and neighbouring words, are independent
    pairs = (kept[:, :-1] & kept[:, 1:]).float().mean().item()
    assert abs(pairs - (1 - rate) ** 2) < 3e-3


def test_backward_makes_the_same_mask_again():
    x = torch.ones(300, 70, requires_grad=True)
    y = compiled_dropout(x, 0.4)
    g = torch.randn_like(y)
    y.backward(g)
    torch.testing.assert_close(x.grad, g * y.detach(), rtol=0, atol=0)  # y is the mask here


def test_gradcheck_in_float64():
    x = torch.randn(6, 9, dtype=torch.float64, requires_grad=True)

    def seeded(t):
        torch.manual_seed(11)  # the same mask at every evaluation
        return compiled_dropout(t, 0.25)

    assert torch.autograd.gradcheck(seeded, (x,))


def test_follows_the_seed_draws_fresh_masks_and_ignores_the_thread_count():
    x = torch.ones(64, 48, 256)
    threads = torch.get_num_threads()
    try:
        masks = []
        for n in (1, 2):
            torch.set_num_threads(n)
            torch.manual_seed(3)
            masks.append(compiled_dropout(x, 0.1))
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(masks[0], masks[1])
    assert not torch.equal(compiled_dropout(x, 0.1), compiled_dropout(x, 0.1))


def test_relu_dropout_is_relu_of_dropout_with_the_same_mask_and_gradient():
    x = torch.randn(40, 33, requires_grad=True)
    torch.manual_seed(5)
    fast = compiled_relu_dropout(x, 0.3)
    x2 = x.detach().clone().requires_grad_()
    torch.manual_seed(5)
    slow = torch.relu(compiled_dropout(x2, 0.3))
    torch.testing.assert_close(fast, slow, rtol=0, atol=0)
    assert len(fast.grad_fn.saved_tensors) == 1  # the output, no mask
    g = torch.randn_like(fast)
    fast.backward(g)
    slow.backward(g)
    torch.testing.assert_close(x.grad, x2.grad, rtol=0, atol=0)


def test_low_precision_and_strided_inputs():
    x = torch.randn(16, 24)
    low = x.to(torch.bfloat16)
    torch.manual_seed(2)
    y = compiled_dropout(low, 0.2)
    torch.manual_seed(2)
    ref = compiled_dropout(low.float(), 0.2)  # computed in float32, rounded once
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), ref.to(torch.bfloat16).float(), rtol=0, atol=0)
    torch.manual_seed(2)
    strided = compiled_dropout(x.t(), 0.2)  # element order of the shape
    torch.manual_seed(2)
    torch.testing.assert_close(strided, compiled_dropout(x.t().contiguous(), 0.2))


def test_extreme_rates_and_a_bad_threshold(kernels):
    x = torch.ones(10_000)
    assert torch.count_nonzero(compiled_dropout(x, 1 - 2**-18)) == 0  # rounds to p = 1
    torch.testing.assert_close(compiled_dropout(x, 2**-18), x / (1 - 2**-18))  # p -> 0
    with pytest.raises(RuntimeError, match="threshold"):
        kernels.dropout(x, 70_000, 1.0, 0)


def test_bias_relu_dropout_and_its_backward_work_in_place(kernels):
    h, b = torch.randn(7, 300), torch.randn(300)  # rows cross the kernel's blocks
    ref = kernels.relu_dropout(h + b, 13107, 1.25, 42)
    out = h.clone()
    assert kernels.bias_relu_dropout_(out, b, 13107, 1.25, 42) is out
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    g = torch.randn(7, 300)
    grad = g.clone()
    assert kernels.relu_dropout_backward_(grad, ref, 1.25) is grad
    torch.testing.assert_close(grad, torch.where(ref > 0, g * 1.25, 0.0), rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="bias_relu_dropout_"):
        kernels.bias_relu_dropout_(h.clone(), torch.randn(299), 13107, 1.25, 42)
    with pytest.raises(RuntimeError, match="relu_dropout_backward_"):
        kernels.relu_dropout_backward_(g.t(), ref, 1.25)  # not contiguous


def plain_feed_forward(ffn, x):
    """The accelerated module's path without the kernels: the same masks."""
    return ffn.w_2(relu_dropout(ffn.w_1(x), ffn.dropout.p, kernels=False))


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_feed_forward_fast_path_equals_the_plain_one(layout):
    """With the kernel on, the feed-forward layer runs as one function with a written-out
    backward; same mask (same key) as the plain path, so the same output and gradients."""
    torch.manual_seed(0)
    ffn = accelerate(PositionwiseFeedForward(24, 80, dropout=0.3).train(), kernels=True)
    x0 = torch.randn(3, 7, 24) if layout == "contiguous" else torch.randn(7, 3, 24).transpose(0, 1)
    results, names = [], []
    for forward in (lambda x: ffn(x), lambda x: plain_feed_forward(ffn, x)):
        x = x0.clone().requires_grad_()
        torch.manual_seed(5)
        y = forward(x)
        ffn.zero_grad()
        y.backward(torch.linspace(-1, 1, y.numel()).view(y.shape))
        results.append([y.detach(), x.grad] + [p.grad.clone() for p in ffn.parameters()])
        names.append(y.grad_fn.name())
    assert names[0] == "_CompiledFeedForwardBackward" != names[1]
    assert not torch.allclose(results[0][0], ffn.eval()(x0))  # dropout was at work
    for fast, plain in zip(*results):
        torch.testing.assert_close(fast, plain, rtol=1e-5, atol=1e-6)


def test_feed_forward_fast_path_in_bfloat16_and_with_frozen_weights():
    torch.manual_seed(0)
    ffn = accelerate(
        PositionwiseFeedForward(16, 64, dropout=0.2).train().to(torch.bfloat16), kernels=True
    )
    x = torch.randn(4, 5, 16, dtype=torch.bfloat16)
    torch.manual_seed(1)
    fast = ffn(x)
    torch.manual_seed(1)
    plain = plain_feed_forward(ffn, x)
    assert fast.dtype == torch.bfloat16
    torch.testing.assert_close(fast, plain, rtol=2e-2, atol=2e-2)  # roundings differ
    ffn.w_1.requires_grad_(False)  # only what is asked for is computed
    x = x.float().requires_grad_()
    ffn.float()
    ffn(x).sum().backward()
    assert ffn.w_1.weight.grad is None and ffn.w_2.weight.grad is not None
    assert x.grad is not None


def test_feed_forward_keeps_the_plain_path_under_autocast():
    torch.manual_seed(0)
    ffn = accelerate(PositionwiseFeedForward(16, 64, dropout=0.2).train(), kernels=True)
    x = torch.randn(4, 5, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        torch.manual_seed(1)
        got = ffn(x)
        torch.manual_seed(1)
        want = plain_feed_forward(ffn, x)
    assert torch.equal(got, want) and got.grad_fn.name() == want.grad_fn.name()


def test_dropout_module_uses_it_only_with_kernels():
    x = torch.randn(8, 20, 64)
    drop = accelerate(torch.nn.Dropout(0.1).train(), kernels=True)
    assert type(drop) is FastDropout and drop.kernels
    torch.manual_seed(4)
    on = drop(x)
    assert drop.eval()(x) is x  # evaluation: no dropout at all
    accelerate(drop.train(), kernels=False)  # switched off again
    torch.manual_seed(4)
    off = drop(x)
    torch.manual_seed(4)
    assert torch.equal(on, compiled_dropout(x, 0.1))
    torch.manual_seed(4)
    assert torch.equal(off, x * keep_mask(x.shape, 0.1))  # the pure-PyTorch mask
    assert torch.equal(on, off)  # ... which is the same


@pytest.mark.parametrize("shape", [(7,), (1001,), (3, 1025), (32, 48, 1024)])
def test_the_kernel_makes_the_pure_pytorch_mask(shape):
    """Both paths: the same key from the generator and the same bits from it."""
    x = torch.randn(shape)
    for p in (0.1, 0.5, 2**-16):
        torch.manual_seed(9)
        pure = x * keep_mask(x.shape, p)
        torch.manual_seed(9)
        assert torch.equal(compiled_dropout(x, p), pure)
    torch.manual_seed(9)
    keep_mask(x.shape, 0.1)
    after_pure = torch.rand(3)
    torch.manual_seed(9)
    compiled_dropout(x, 0.1)
    assert torch.equal(torch.rand(3), after_pure)  # one draw each from the generator
    if x.dim() == 2:  # a transposed input, too
        torch.manual_seed(9)
        pure = x.t() * keep_mask(x.t().shape, 0.1)
        torch.manual_seed(9)
        assert torch.equal(compiled_dropout(x.t(), 0.1), pure)


def test_a_training_step_is_the_same_with_and_without_it():
    """The switch changes the speed only: same masks, so the same loss and gradients (up to
    the rounding of the feed-forward bias, added after the product instead of before, and of
    the attention sums)."""
    c = TransformerConfig.tiny(50, d_model=64, d_ff=128, N=2, P_drop=0.3)
    torch.manual_seed(0)
    model = Transformer(c).train()
    src, tgt = torch.randint(3, 50, (8, 12)), torch.randint(3, 50, (8, 13))
    src[1:, 9:], tgt[2:, 10:] = c.pad_id, c.pad_id  # padding masks, too
    results = []
    for switch in (False, True):
        accelerate(model, kernels=switch)
        torch.manual_seed(1)
        logits = model(src, tgt[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten())
        grads = torch.autograd.grad(loss, list(model.parameters()))
        results.append((loss, grads))
    (loss_off, grads_off), (loss_on, grads_on) = results
    torch.testing.assert_close(loss_on, loss_off, rtol=1e-6, atol=0)
    for g_on, g_off in zip(grads_on, grads_off):
        torch.testing.assert_close(g_on, g_off, rtol=1e-4, atol=1e-6)


# ---- attention ----------------------------------------------------------------------------

needs_mkl = pytest.mark.skipif(
    not cpu_kernels.attention_available(), reason="this PyTorch has no MKL batched matrix multiply"
)


@pytest.fixture
def attention_calls(monkeypatch, kernels):
    """Counts the compiled attention kernel's forward calls."""
    calls = []
    real = kernels.attention_forward
    monkeypatch.setattr(kernels, "attention_forward", lambda *a: calls.append(1) or real(*a))
    return calls


def layer_and_grads(layer, x, memory, mask, is_causal=False, need_weights=False, cache=None):
    """The layer's output and the gradients of x, memory (if any) and every parameter."""
    out, _ = layer(x, memory, mask, need_weights=need_weights, cache=cache, is_causal=is_causal)
    inputs = [x] + ([memory] if memory is not None else []) + list(layer.parameters())
    weights = torch.linspace(-2, 2, out.numel()).view(out.shape)  # a gradient of every sign
    return [out.detach()] + list(torch.autograd.grad(out, inputs, weights))


def blocked_row(mask: torch.Tensor) -> torch.Tensor:
    mask[1, 0, 2] = False  # query 2 of row 1 attends to nothing
    return mask


MASKS = {
    "none": lambda B, T, S: None,
    "padding": lambda B, T, S: torch.arange(S)[None, None, None, :]
    < torch.tensor([S, S - 2, 0, S - 3][:B])[
        :, None, None, None
    ],  # (B, 1, 1, S), one row all padding
    "per query": lambda B, T, S: blocked_row(
        torch.rand(B, 1, T, S, generator=torch.Generator().manual_seed(3)) > 0.4
    ),  # (B, 1, T, S)
    "per head": lambda B, T, S: torch.rand(B, 4, T, S, generator=torch.Generator().manual_seed(4))
    > 0.3,  # (B, H, T, S)
    "2-d": lambda B, T, S: torch.rand(T, S, generator=torch.Generator().manual_seed(5)) > 0.2,
}


@needs_mkl
@pytest.mark.parametrize("mask_kind", list(MASKS))
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_attention_kernel_equals_the_plain_paths(attention_calls, mask_kind, cross):
    """Output and every gradient (input, memory, W^Q;W^K;W^V, W^O, biases) as with
    PyTorch's fused kernel and as with the explicit softmax(QK^T/sqrt(d_k))V."""
    torch.manual_seed(0)
    B, T, S, D = 4, 6, (9 if cross else 6), 32
    layer = accelerate(MultiHeadAttention(D, 4).train())
    x0, m0 = torch.randn(B, T, D), torch.randn(B, S, D)
    mask = MASKS[mask_kind](B, T, S)
    results = []
    for switch, fused in ((True, True), (False, True), (False, False)):
        layer.fused = fused
        x = x0.clone().requires_grad_()
        memory = m0.clone().requires_grad_() if cross else None
        accelerate(layer, kernels=switch)
        results.append(layer_and_grads(layer, x, memory, mask))
    assert len(attention_calls) == 1
    compiled, fused, explicit = results
    if mask is not None:  # a query with nothing to attend to gives zeros
        blocked = ~mask.expand(B, 4, T, S).any(-1).all(1)  # (B, T)
        assert bool(blocked.any()) == (mask_kind in ("padding", "per query"))
    for got, want_fused, want_explicit in zip(compiled, fused, explicit):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, want_fused, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(got, want_explicit, rtol=1e-5, atol=1e-5)


@needs_mkl
@pytest.mark.parametrize("heads", [1, 2, 8])
def test_attention_kernel_with_the_causal_flag_and_other_head_counts(attention_calls, heads):
    torch.manual_seed(1)
    layer = MultiHeadAttention(16, heads)
    x0 = torch.randn(3, 11, 16)
    results = []
    for switch in (True, False):
        accelerate(layer, kernels=switch)
        results.append(
            layer_and_grads(layer, x0.clone().requires_grad_(), None, None, is_causal=True)
        )
    assert len(attention_calls) == 1
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@needs_mkl
def test_attention_kernel_only_where_it_applies(attention_calls, monkeypatch):
    """Weights asked for, a decoding cache's past keys, low-precision weights, dropout on the weights in
    training, a long sequence or no MKL: PyTorch's kernel (or the explicit path), as without
    the switch."""
    torch.manual_seed(2)
    layer = accelerate(MultiHeadAttention(16, 2).train(), kernels=True)
    x = torch.randn(2, 5, 16)

    def calls(*args, **kwargs) -> int:
        before = len(attention_calls)
        layer(*args, **kwargs)
        return len(attention_calls) - before

    assert calls(x) == 1
    assert calls(x, need_weights=True) == 0
    cache = {}
    assert calls(x, cache=cache) == 1  # a first step: keys are the projection's
    assert calls(x[:, :1], cache=cache) == 0  # then past keys, concatenated head by head
    layer.double()
    assert calls(x.double()) == 0  # float32 only
    layer.float()
    layer.dropout = 0.1
    assert calls(x) == 0
    layer.eval()  # no dropout in evaluation: the kernel
    assert calls(x) == 1
    side = int(math.isqrt(MAX_SCORES))
    assert calls(torch.randn(1, side, 16)) == 1
    assert calls(torch.randn(1, side + 1, 16)) == 0
    monkeypatch.setattr(cpu_kernels, "attention_available", lambda: False)
    assert calls(x) == 0
    monkeypatch.setattr(cpu_kernels, "attention_available", lambda: True)
    accelerate(layer, kernels=False)
    assert calls(x) == 0  # accelerated without the kernels
    assert len(attention_calls) == 4


@needs_mkl
def test_attention_kernel_with_a_decoding_cache_equals_the_plain_layer(attention_calls):
    """Step-by-step causal self-attention with a key/value cache: the first chunk through
    the kernel (its keys are the projection's), the next tokens through PyTorch's kernel
    (the cache's keys), the same outputs as the plain layer's."""
    torch.manual_seed(5)
    plain = MultiHeadAttention(16, 4).eval()
    fast = accelerate(MultiHeadAttention(16, 4), kernels=True).eval()
    fast.load_state_dict(plain.state_dict())
    x = torch.randn(2, 7, 16)
    outputs = []
    for layer in (plain, fast):
        cache = {}
        first, _ = layer(x[:, :5], cache=cache, is_causal=True)
        rest = [layer(x[:, t : t + 1], cache=cache, is_causal=True)[0] for t in (5, 6)]
        outputs.append(torch.cat([first, *rest], dim=1))
    assert len(attention_calls) == 1
    torch.testing.assert_close(outputs[1], outputs[0], rtol=1e-5, atol=1e-5)
    whole, _ = plain(x, is_causal=True)  # and what the whole sequence gives
    torch.testing.assert_close(outputs[1], whole, rtol=1e-5, atol=1e-5)


@needs_mkl
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_attention_kernel_under_autocast_equals_the_fused_path(attention_calls, cross):
    """Under bf16 autocast the projections come in bf16; the kernel works in fp32, as the
    fused path does, so both give the same bf16 output and gradients up to rounding."""
    torch.manual_seed(3)
    layer = MultiHeadAttention(32, 4)
    x0, m0 = torch.randn(4, 7, 32), torch.randn(4, 5, 32)
    mask = MASKS["padding"](4, 7, 5 if cross else 7)
    results = []
    for switch in (True, False):
        x = x0.clone().requires_grad_()
        memory = m0.clone().requires_grad_() if cross else None
        accelerate(layer, kernels=switch)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            results.append(layer_and_grads(layer, x, memory, mask))
    assert len(attention_calls) == 1
    assert results[0][0].dtype == torch.bfloat16
    for got, want in zip(*results):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)


@needs_mkl
def test_attention_kernel_rejects_what_it_cannot_read(kernels):
    q = torch.randn(2, 3, 8)
    with pytest.raises(RuntimeError, match="q must be a float32 CPU tensor"):
        kernels.attention_forward(q.double(), q, q, None, 2, 0.5)
    with pytest.raises(RuntimeError, match="unit stride along D"):
        kernels.attention_forward(
            q.transpose(1, 2).contiguous().transpose(1, 2), q, q, None, 2, 0.5
        )
    with pytest.raises(RuntimeError, match="mask must be bool of shape"):
        kernels.attention_forward(q, q, q, torch.ones(2, 2, 3, 4, dtype=torch.bool), 2, 0.5)
    with pytest.raises(RuntimeError, match="heads must divide D"):
        kernels.attention_forward(q, q, q, None, 3, 0.5)


def test_a_model_trains_with_it():
    torch.manual_seed(0)
    c = TransformerConfig.tiny(20, d_model=32, d_ff=64, N=1)
    model = accelerate(Transformer(c).train(), kernels=True)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    src = torch.randint(3, 20, (16, 10))
    losses = []
    for _ in range(60):
        logits = model(src, src[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), src[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses)
    assert sum(losses[-5:]) < 0.5 * sum(losses[:5])


def test_kernels_without_a_compiler_fail_at_once_or_fall_back(monkeypatch):
    monkeypatch.setattr(cpu_kernels, "_module", None)
    monkeypatch.delenv("CXX", raising=False)
    real_which = shutil.which
    monkeypatch.setattr(
        cpu_kernels.shutil, "which", lambda name: None if name == "c++" else real_which(name)
    )
    layer = MultiHeadAttention(16, 2)
    with pytest.raises(RuntimeError, match="C\\+\\+ compiler"):
        accelerate(layer, kernels=True)
    assert type(layer) is MultiHeadAttention  # left as it was
    assert not accelerate(layer).kernels  # default: without them
    with pytest.raises(TypeError, match="kernels"):
        accelerate(layer, kernels="yes")


def test_cli_trains_with_it(tmp_path):
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "transformer_lib.train",
            "--task",
            "dates",
            "--n-train",
            "200",
            "--n-valid",
            "10",
            "--d-model",
            "32",
            "--d-ff",
            "64",
            "--max-tokens",
            "400",
            "--steps",
            "3",
            "--no-progress",
            "--threads",
            "1",
            "--compiled-kernels",
            "--out",
            str(tmp_path / "run"),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "trained steps 1-3" in proc.stdout


def test_cli_names_the_flag_when_the_kernel_cannot_be_built(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cpu_kernels, "_module", None)
    monkeypatch.setattr(cpu_kernels.shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "ninja", None)  # `import ninja` fails too
    with pytest.raises(SystemExit) as exit_info:
        train_cli.main(["--task", "dates", "--compiled-kernels", "--out", str(tmp_path / "x")])
    assert exit_info.value.code == 2
    assert "--compiled-kernels" in capsys.readouterr().err


def tiny_cli_run(tmp_path, *flags):
    return [
        "--task",
        "dates",
        "--n-train",
        "100",
        "--n-valid",
        "5",
        "--d-model",
        "16",
        "--d-ff",
        "32",
        "--max-tokens",
        "200",
        "--steps",
        "1",
        "--no-progress",
        "--out",
        str(tmp_path / "run"),
        *flags,
    ]


@pytest.mark.parametrize(
    "flags, used", [((), True), (("--no-compiled-kernels",), False), (("--dropout", "0"), True)]
)  # attention still
def test_cli_accelerates_the_model_with_kernels_by_default(
    tmp_path, capsys, monkeypatch, flags, used
):
    seen = []
    real_accelerate = train_cli.fast.accelerate
    monkeypatch.setattr(
        train_cli.fast,
        "accelerate",
        lambda model, kernels: seen.append(kernels) or real_accelerate(model, kernels),
    )
    assert train_cli.main(tiny_cli_run(tmp_path, *flags)) == 0
    assert seen == [used]  # once, for the run's model
    assert ("compiled CPU kernels: on" in capsys.readouterr().out) == used


def test_cli_goes_on_without_it_when_it_cannot_be_built(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cpu_kernels, "_module", None)
    monkeypatch.setattr(cpu_kernels.shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "ninja", None)
    assert train_cli.main(tiny_cli_run(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "compiled CPU kernels: off (the compiled CPU kernels need the ninja build tool" in out
    assert "checkpoint:" in out


def test_cli_leaves_it_to_cpu_training(monkeypatch):
    monkeypatch.setattr(cpu_kernels, "load", lambda: pytest.fail("built for a GPU run"))
    args = train_cli.build_parser().parse_args(
        ["--task", "dates", "--out", "x", "--device", "meta"]
    )
    assert train_cli.wants_compiled_kernels(train_cli.build_parser(), args) is False


@pytest.mark.parametrize("system, openmp", [("linux", True), ("darwin", False), ("win32", False)])
def test_openmp_is_asked_for_only_on_linux(monkeypatch, system, openmp):
    monkeypatch.setattr(cpu_kernels.sys, "platform", system)
    flags = cpu_kernels._compiler_flags()
    assert ("-fopenmp" in flags) == openmp and "-O3" in flags


def test_a_stale_build_lock_left_by_a_killed_build_does_not_hang_the_next_load():
    """PyTorch's own `lock` file, left behind by a build killed mid-way, makes every later
    build wait forever; load() removes one older than STALE_LOCK_S."""
    from torch.utils.cpp_extension import _get_build_directory

    name = cpu_kernels._build_name(cpu_kernels.SOURCE_FILE.read_text())
    lock = Path(_get_build_directory(name, verbose=False)) / "lock"
    lock.touch()  # what a killed build leaves ...
    old = time.time() - cpu_kernels.STALE_LOCK_S - 60
    os.utime(lock, (old, old))  # ... some time ago
    child = subprocess.run(
        [sys.executable, "-c", "from transformer_lib.fast import kernels; kernels.load()"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr
    assert not lock.exists()


def test_a_recent_build_lock_is_waited_for(tmp_path):
    lock = tmp_path / "lock"
    lock.touch()
    start = time.monotonic()
    cpu_kernels._wait_for_stale_lock(lock, stale_s=1.5)  # nobody removes it: stale at 1.5 s
    assert 1.0 < time.monotonic() - start < 30 and not lock.exists()


def test_a_build_held_by_another_process_is_waited_for_then_named(tmp_path, monkeypatch):
    fcntl = pytest.importorskip("fcntl")
    with open(tmp_path / "build.flock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        child = subprocess.run(
            [
                sys.executable,
                "-c",
                "from pathlib import Path; from transformer_lib.fast import kernels\n"
                f"with kernels._build_lock(Path({str(tmp_path)!r}), wait_s=1): pass",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert child.returncode != 0
    assert "another process has been building" in child.stderr
