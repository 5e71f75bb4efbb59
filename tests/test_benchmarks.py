"""Smoke test of every benchmark script's --quick mode, each in its own subprocess.

Only that the scripts run and print their tables; no timing is asserted (figures from a
quick run are meaningless). Also checks the analytic pieces the tables rest on.
"""
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

SCRIPTS = {
    "train_throughput.py": ["matmul peak", "torch.nn.Transformer", "transformer_lib", "MFU"],
    "decode_cache.py": ["no cache ms", "speed-up"],
    "attention_memory.py": ["explicit MiB", "fused MiB"],
    "scaling.py": ["Step time against length", "Step time against batch"],
    "profile_step.py": ["Training step profile", "matmul", "optimizer (Adam)"],
}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_quick_mode_runs_and_prints_its_table(script):
    out = subprocess.run([sys.executable, str(BENCH / script), "--quick", "--threads", "1"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    for heading in SCRIPTS[script]:
        assert heading in out.stdout, out.stdout
    if script == "decode_cache.py":           # cached and uncached decoding agree
        rows = [r for r in out.stdout.splitlines() if r.startswith("|") and "---" not in r]
        assert len(rows) == 3 and all(r.rstrip(" |").endswith("yes") for r in rows[1:])


def test_fit_exponent_recovers_a_power_law():
    from scaling import fit_exponent
    sizes = [4, 8, 16, 32]
    k, a = fit_exponent(sizes, [0.5 * s ** 1.7 for s in sizes])
    assert abs(k - 1.7) < 1e-9 and abs(a - 0.5) < 1e-9


def test_matmul_flops_count_by_hand():
    from train_throughput import matmul_flops
    from transformer_lib import TransformerConfig
    c = TransformerConfig.tiny(10, N=1, d_model=4, d_ff=8, h=2)
    B, S, T, D, F, V = 2, 3, 5, 4, 8, 10
    enc = S * (4 * D * D + 2 * D * F)
    dec = T * (4 * D * D + 2 * D * D + 2 * D * F + D * V) + S * 2 * D * D
    attn = 2 * (S * S + T * T + T * S) * D
    assert matmul_flops(c, B, S, T) == 3 * 2 * B * (enc + dec + attn)


# --- The speed changes the benchmarks measure keep the behaviour ---------------------------

def test_cpu_dropout_keeps_with_probability_one_minus_p_and_rescales():
    import torch
    from torch import nn
    from transformer_lib.residual import Dropout
    torch.manual_seed(0)
    drop, x = Dropout(0.1), torch.full((1_000_000,), 3.0, requires_grad=True)
    assert isinstance(drop, nn.Dropout)
    y = drop(x)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.9) < 2e-3      # 6 standard deviations: 1.8e-3
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 3.0 / 0.9))
    y.sum().backward()                                       # gradient: the same mask, scaled
    torch.testing.assert_close(x.grad, kept.float() / 0.9)
    assert not torch.equal(drop(x) != 0, kept)               # a fresh mask every call
    drop.eval()
    assert drop(x) is x


def test_cpu_dropout_follows_the_seed_and_matches_the_rate_per_position():
    import torch
    from transformer_lib.residual import Dropout
    drop = Dropout(0.5)
    torch.manual_seed(1)
    a = drop(torch.ones(4000, 50))
    torch.manual_seed(1)
    torch.testing.assert_close(drop(torch.ones(4000, 50)), a)
    per_column = (a != 0).float().mean(dim=0)                 # no position is favoured
    assert per_column.min() > 0.45 and per_column.max() < 0.55


def test_fused_attention_under_bf16_autocast_matches_the_explicit_path():
    import torch
    from transformer_lib import attention, fused_attention
    from transformer_lib.masks import decoder_mask
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 7, 8) for _ in range(3))
    ids = torch.tensor([[5, 6, 7, 8, 9, 0, 0], [5, 6, 7, 8, 9, 4, 3]])
    mask = decoder_mask(ids, pad_id=0)                                        # (B, 1, T, T)
    expected, _ = attention(q.double(), k.double(), v.double(), mask)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = fused_attention(q, k, v, mask)
    assert out.dtype == torch.bfloat16                       # what autocast would give
    torch.testing.assert_close(out.double(), expected, atol=2e-2, rtol=2e-2)
    out16 = fused_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), mask)
    assert out16.dtype == torch.bfloat16
    torch.testing.assert_close(out16.double(), expected, atol=3e-2, rtol=3e-2)
    exact = fused_attention(q.double(), k.double(), v.double(), mask)        # fp64 untouched
    torch.testing.assert_close(exact, expected, atol=1e-12, rtol=1e-12)


def test_training_step_under_bf16_autocast_reaches_every_parameter():
    import torch
    from transformer_lib import Transformer, TransformerConfig
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny(30, N=1, P_drop=0.1)).train()
    src, tgt = torch.randint(1, 30, (3, 6)), torch.randint(1, 30, (3, 5))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(src, tgt)
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits.float()).all()
    logits.float().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all()
               for p in model.parameters())
