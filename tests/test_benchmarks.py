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
