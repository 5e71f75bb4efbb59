"""The bf16 decision: native bf16 from the CPU's flags or a timing, and what the trainer,
the training command line and the benchmarks do with it."""

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from transformer_lib.cli import train_command as train_cli
from transformer_lib.training import precision
from transformer_lib.training.precision import Bf16Support, bf16_problem, decide

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("flags", [{"avx2", "amx_bf16"}, {"avx512f", "avx512_bf16"}, {"bf16"}])
def test_native_from_the_cpu_flags_without_timing(flags, monkeypatch):
    monkeypatch.setattr(precision, "timed_ratio", lambda: pytest.fail("timed"))
    support = decide(flags, "AVX512")
    assert support.native and "bf16" in support.how


@pytest.mark.parametrize("ratio, native", [(0.6, True), (2.9, True), (3.1, False), (95.0, False)])
def test_without_flags_a_timing_decides(ratio, native):
    support = decide({"avx2", "fma"}, "AVX2", ratio=ratio)
    assert support.native == native
    assert "AVX2" in support.how and f"{ratio:.1f}x" in support.how


def mock_cpu(monkeypatch, native: bool):
    monkeypatch.setattr(precision, "cpu_bf16", lambda: Bf16Support(native, "mocked"))


def test_the_problem_names_the_cpu_only_where_bf16_is_emulated(monkeypatch):
    mock_cpu(monkeypatch, True)
    assert bf16_problem(torch.device("cpu")) is None
    mock_cpu(monkeypatch, False)
    problem = bf16_problem(torch.device("cpu"))
    assert "no native bfloat16" in problem and "mocked" in problem
    assert bf16_problem(torch.device("meta")) is None  # not a CPU question


def cli_args(tmp_path, *flags, device="cpu"):
    return [
        "--task",
        "dates",
        "--n-train",
        "50",
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
        "--no-compiled-kernels",
        "--device",
        device,
        "--out",
        str(tmp_path / "run"),
        *flags,
    ]


def test_cli_refuses_bf16_at_once_on_a_cpu_without_it(tmp_path, capsys, monkeypatch):
    mock_cpu(monkeypatch, False)
    monkeypatch.setattr(train_cli, "run", lambda *a: pytest.fail("trained"))
    with pytest.raises(SystemExit) as exit_info:
        train_cli.main(cli_args(tmp_path, "--bf16"))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--bf16:" in err and "no native bfloat16" in err and "leave out --bf16" in err
    assert not (tmp_path / "run").exists()


def test_cli_trains_in_bf16_where_the_cpu_has_it(tmp_path, capsys, monkeypatch):
    mock_cpu(monkeypatch, True)
    seen = []
    finished = SimpleNamespace(dist=SimpleNamespace(is_main=False), step=1)
    monkeypatch.setattr(train_cli, "run", lambda args, *a: seen.append(args.bf16) or finished)
    assert train_cli.main(cli_args(tmp_path, "--bf16")) == 0  # only the decision is tested
    assert seen == [True]


def test_trainer_warns_about_bf16_on_such_a_cpu(monkeypatch):
    mock_cpu(monkeypatch, False)
    from test_training_trainer import make_trainer

    with pytest.warns(UserWarning, match="bf16=True: this CPU"):
        make_trainer(steps=1, bf16=True)


@pytest.mark.parametrize(
    "device, message", [("cuda:0", "no CUDA GPU"), ("gpu", "not a device PyTorch knows")]
)
def test_cli_says_at_once_when_the_device_cannot_be_used(tmp_path, capsys, device, message):
    if device.startswith("cuda") and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(SystemExit) as exit_info:
        train_cli.main(cli_args(tmp_path, device=device))
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_benchmarks_leave_bf16_out_with_a_note_on_such_a_cpu():
    """Runs where the machine has no native bf16 as it is; elsewhere the rows stay."""
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "train_throughput.py"),
            "--quick",
            "--threads",
            "1",
            "--no-compiled-kernels",
            "--no-accelerate",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    header = next(line for line in out.stdout.splitlines() if line.startswith("# machine:"))
    assert "native bf16:" in header
    native = precision.cpu_bf16().native
    assert ("# bf16 left out:" in out.stdout) == (not native)
    assert any("|  bf16 |" in line for line in out.stdout.splitlines()) == native
