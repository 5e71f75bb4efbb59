"""Smoke test of every benchmark script's --quick mode, each in its own subprocess.

Only that the scripts run and print their tables; no timing is asserted (figures from a
quick run are meaningless). Also checks the analytic pieces the tables rest on.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# the scripts' modules (common, workload, ...) are importable here through pytest's
# pythonpath option (pyproject.toml)
BENCH = Path(__file__).resolve().parent.parent / "benchmarks"

SCRIPTS = {
    "train_throughput.py": [
        "# allocator:",
        "matmul peak",
        "torch.nn.Transformer",
        "transformer_lib",
        "+ accelerate, no kernels",
        "MFU",
    ],
    "decode_cache.py": ["no cache ms", "speed-up"],
    "attention_memory.py": ["explicit MiB", "fused MiB"],
    "scaling.py": ["Step time against length", "Step time against batch"],
    "profile_step.py": ["Training step profile", "matmul", "optimizer (Adam)"],
    "padding.py": ["packed speed-up", "length-sorted (token_batches)"],
    "score_translation.py": ["| copy the source |", "| greedy |", "| beam 4, alpha 0.6 |"],
}
if shutil.which("c++"):  # the compiled kernels row, and Inductor, where they can be built
    SCRIPTS["train_throughput.py"].append("+ compiled kernels")
    SCRIPTS["inductor_cpu.py"] = ["bool mask y <= 0", "feed-forward step", "fast.compile_model"]


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_quick_mode_runs_and_prints_its_table(script):
    out = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick", "--threads", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )  # may build a kernel
    assert out.returncode == 0, out.stderr[-2000:]
    for heading in SCRIPTS[script]:
        assert heading in out.stdout, out.stdout
    if script == "train_throughput.py":  # no model FLOP utilisation above 100%
        mfu = [
            r.split("|")[-2].strip()
            for r in out.stdout.splitlines()
            if r.startswith("|") and r.rstrip(" |").endswith("%")
        ]
        assert mfu and all(0 <= int(m.rstrip("%")) <= 100 for m in mfu), out.stdout
    if script == "decode_cache.py":  # cached and uncached decoding agree
        rows = [r for r in out.stdout.splitlines() if r.startswith("|") and "---" not in r]
        assert len(rows) == 3 and all(r.rstrip(" |").endswith("yes") for r in rows[1:])


def test_time_to_bleu_quick_reports_bleu_per_budget_and_names_the_cpu():
    """--quick trains the English->French recipe's tiny stand-in through the training
    command line for a few seconds and scores a handful of test verses."""
    from transformer_lib.training.precision import cpu_model

    out = subprocess.run(
        [sys.executable, str(BENCH / "time_to_bleu.py"), "--quick", "--threads", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"8 test verses; CPU: {cpu_model()}" in out.stdout, out.stdout
    assert "-m transformer_lib.train --corpus bible-en-fr" in out.stdout
    assert "--time-budget 0.1" in out.stdout
    lines = [r for r in out.stdout.splitlines() if r.startswith("|")]
    assert [c.strip() for c in lines[0].strip("|").split("|")] == [
        "minutes",
        "steps",
        "train s",
        "process s",
        "BLEU greedy",
        "BLEU beam 4",
        "scoring s",
    ]
    rows = [[c.strip() for c in r.strip("|").split("|")] for r in lines[2:]]
    assert len(rows) == 1 and rows[0][0] == "0.1", out.stdout
    assert int(rows[0][1].replace(",", "")) >= 1  # steps trained
    for bleu in rows[0][4:6]:
        assert 0.0 <= float(bleu) <= 100.0


def test_isolated_mode_times_each_model_in_its_own_process():
    out = subprocess.run(
        [
            sys.executable,
            str(BENCH / "train_throughput.py"),
            "--quick",
            "--threads",
            "1",
            "--isolated",
            "--dtypes",
            "fp32",
            "--no-compiled-kernels",
            "--no-accelerate",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "each model in its own process" in out.stdout
    rows = [r for r in out.stdout.splitlines() if r.startswith("|   tiny |  fp32")]
    assert [r.split("|")[3].strip() for r in rows] == ["torch.nn.Transformer", "transformer_lib"]
    assert "# step times:" not in out.stdout  # the children's lines stay theirs


def test_utilisation_is_never_above_one_hundred_percent():
    from common import utilisation

    mfu, note = utilisation({"a": 50e9, "b": 80e9}, 100e9)
    assert mfu == {"a": 0.5, "b": 0.8} and note == ""
    mfu, note = utilisation({"a": 50e9, "b": 160e9}, 100e9)  # a peak measured too low
    assert mfu == {"a": 50 / 160, "b": 1.0}
    assert "row 'b' ran at 160.0 GFLOP/s, above the measured matmul peak 100.0" in note


def test_the_measured_peak_is_at_least_every_rows_matmul_rate():
    """The peak is measured as the rows run (this process, its threads, the dtype, the
    step's own shapes), so no row's matmul FLOPs per second, even its best round, exceed
    it."""
    import torch
    import common
    from workload import (
        QUICK,
        make_batch,
        make_model,
        matmul_flops,
        step_matmul_shapes,
        train_step_fn,
    )
    from transformer_lib import TransformerConfig

    overrides, batch, length = QUICK["tiny"]
    c = TransformerConfig.tiny(1000, max_len=128, **overrides)
    cpu = torch.device("cpu")
    src, tgt = make_batch(c, batch, length + 1, cpu, torch.Generator().manual_seed(0))
    src = src[:, :length]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fns = {
            label: train_step_fn(make_model(label, c, cpu), src, tgt, c.pad_id, False, cpu, True)
            for label in ("torch.nn.Transformer", "transformer_lib", "+ accelerate, no kernels")
        }
        times = common.interleaved(fns, cpu, reps=3, warmup=2)
        shapes = step_matmul_shapes(c, batch, length, length)
        peak = common.matmul_peak(torch.float32, cpu, shapes + [(64, 64, 64)], reps=3)
    finally:
        torch.set_num_threads(threads)
    assert (batch * length, 16, 3 * 16) in shapes and (batch * length, 16, 1000) in shapes
    flops = matmul_flops(c, batch, length, length)
    for label, ts in times.items():
        assert flops / min(ts) <= peak, (label, flops / min(ts), peak)


def test_fit_exponent_recovers_a_power_law():
    from scaling import fit_exponent

    sizes = [4, 8, 16, 32]
    k, a = fit_exponent(sizes, [0.5 * s**1.7 for s in sizes])
    assert abs(k - 1.7) < 1e-9 and abs(a - 0.5) < 1e-9


def test_matmul_flops_count_by_hand():
    from workload import matmul_flops
    from transformer_lib import TransformerConfig

    c = TransformerConfig.tiny(10, N=1, d_model=4, d_ff=8, h=2)
    B, S, T, D, F, V = 2, 3, 5, 4, 8, 10
    enc = S * (4 * D * D + 2 * D * F)
    dec = T * (4 * D * D + 2 * D * D + 2 * D * F + D * V) + S * 2 * D * D
    attn = 2 * (S * S + T * T + T * S) * D
    assert matmul_flops(c, B, S, T) == 3 * 2 * B * (enc + dec + attn)


@pytest.mark.parametrize("norm_first", [False, True])
def test_packed_forward_equals_the_model_where_it_counts(norm_first):
    """Skipping padded positions changes neither the logits at real target positions nor
    the loss and its gradients (dropout off, so both passes see the same network)."""
    import torch
    import torch.nn.functional as F
    from padding import packed_forward, padded_batch
    from transformer_lib import Transformer, TransformerConfig

    c = TransformerConfig.tiny(50, N=2, d_model=16, d_ff=32, h=2, P_drop=0.0, norm_first=norm_first)
    src, tgt = padded_batch(c, 5, 9, 0.3, torch.device("cpu"), torch.Generator().manual_seed(3))
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    assert (src == c.pad_id).any() and (tgt_in == c.pad_id).any()
    torch.manual_seed(0)
    model = Transformer(c).train()
    grads = []
    for forward in (model, lambda s, t: packed_forward(model, s, t)):
        model.zero_grad()
        logits = forward(src, tgt_in)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=c.pad_id)
        loss.backward()
        grads.append((logits.detach(), loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (ref, ref_loss, ref_grads), (got, got_loss, got_grads) = grads
    real = tgt_in != c.pad_id
    torch.testing.assert_close(got[real], ref[real], rtol=1e-5, atol=1e-5)
    assert (got[~real] == 0).all()
    torch.testing.assert_close(got_loss, ref_loss, rtol=1e-5, atol=1e-6)
    for g, r in zip(got_grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-6)
