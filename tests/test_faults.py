"""Fault injection: tiny training runs as subprocesses, stopped by SIGINT, SIGTERM or
SIGKILL at a chosen step or in the middle of a checkpoint write, then resumed. The resumed
run must end with the very weights of an uninterrupted run (bit for bit), and the stopped
run must say, in one line and without a traceback, how to resume.

The faults are injected by ``tests/fault_harness.py`` (the process signals itself at the
exact moment); one test sends the signal from outside, as a terminal or scheduler would.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from transformer_lib.cli import train_command as train_cli
from transformer_lib.training.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[1]
HARNESS = str(ROOT / "tests" / "fault_harness.py")
TINY = [
    "--task",
    "dates",
    "--n-train",
    "120",
    "--n-valid",
    "4",
    "--n-test",
    "4",
    "--d-model",
    "16",
    "--d-ff",
    "32",
    "--layers",
    "1",
    "--heads",
    "2",
    "--max-tokens",
    "150",
    "--warmup",
    "3",
    "--eval-limit",
    "4",
    "--no-progress",
    "--threads",
    "1",
    "--no-compiled-kernels",
    "--no-keep-freed-memory",
    "--steps",
    "6",
]


@pytest.fixture(autouse=True)
def _restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def harness(out: Path, *flags: str, fault: str = "", sleep: str = "", wait: bool = True):
    env = {**os.environ, "FAULT": fault, "STEP_SLEEP": sleep, "PYTHONHASHSEED": "0"}
    cmd = [sys.executable, HARNESS, *TINY, "--out", str(out), *flags]
    if not wait:
        return subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The weights of an uninterrupted run of the same 6 steps (in this process: the
    resumed runs below run here too)."""
    out = tmp_path_factory.mktemp("reference")
    threads = torch.get_num_threads()
    assert train_cli.main([*TINY, "--out", str(out), "--save-every", "2"]) == 0
    torch.set_num_threads(threads)
    return load_checkpoint(out / "checkpoint.pt")["model"]


def assert_same_weights(path: Path, expected) -> None:
    got = load_checkpoint(path)["model"]
    assert got.keys() == expected.keys()
    for name, tensor in got.items():
        assert torch.equal(tensor, expected[name]), name


# signal, moment, --save-every, exit code, step of the checkpoint left behind
MATRIX = [
    ("SIGINT", "step:3", "2", 130, 3),
    ("SIGTERM", "step:3", "2", 143, 3),
    ("SIGKILL", "step:3", "2", -9, 2),
    ("SIGINT", "step:1", "0", 130, 1),  # no periodic saves: one is written anyway
    ("SIGTERM", "step:5", "0", 143, 5),
    ("SIGINT", "save:2", "2", 130, 4),  # the save of step 4 completes, then it stops
    ("SIGTERM", "save:2", "2", 143, 4),
    ("SIGKILL", "save:2", "2", -9, 2),  # half-written: step 2's checkpoint remains
]


@pytest.mark.parametrize(
    "name,moment,save_every,code,left", MATRIX, ids=[f"{m[0]}-{m[1]}-save{m[2]}" for m in MATRIX]
)
def test_stopped_run_resumes_to_the_uninterrupted_weights(
    tmp_path, reference, name, moment, save_every, code, left
):
    out = tmp_path / "run"
    proc = harness(out, "--save-every", save_every, fault=f"{name}@{moment}")
    assert proc.returncode == code, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    ckpt = load_checkpoint(out / "checkpoint.pt")
    assert ckpt["step"] == left
    temporaries = list(out.glob(".checkpoint.pt.*.tmp"))
    if name == "SIGKILL" and moment.startswith("save"):
        assert len(temporaries) == 1  # what the killed write left
    else:
        assert temporaries == []
    if name != "SIGKILL":
        last = proc.stderr.strip().splitlines()[-1]
        assert f"{name}: stopped after step {left} of 6" in last
        assert "Resume with: python -m transformer_lib.train" in last and "--resume" in last
    assert train_cli.main([*TINY, "--out", str(out), "--save-every", save_every, "--resume"]) == 0
    assert list(out.glob(".*.tmp")) == []  # the resume cleaned up
    assert load_checkpoint(out / "checkpoint.pt")["step"] == 6
    assert_same_weights(out / "checkpoint.pt", reference)


def test_a_signal_during_the_final_save_keeps_the_finished_run(tmp_path, reference):
    out = tmp_path / "run"
    proc = harness(out, "--save-every", "0", fault="SIGINT@save:1")  # step 6's save
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert "training had finished" in proc.stderr and "Traceback" not in proc.stderr
    assert "test: exact match" not in proc.stdout  # not scored
    assert load_checkpoint(out / "checkpoint.pt")["step"] == 6
    assert_same_weights(out / "checkpoint.pt", reference)


def test_ctrl_c_from_outside(tmp_path, reference):
    """SIGINT sent by another process (as a terminal does) while a step runs."""
    out = tmp_path / "run"
    proc = harness(out, "--save-every", "1", sleep="0.4", wait=False)
    deadline = time.monotonic() + 60
    while not (out / "checkpoint.pt").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr and "Resume with:" in stderr
    step = load_checkpoint(out / "checkpoint.pt")["step"]
    assert 1 <= step < 6
    assert train_cli.main([*TINY, "--out", str(out), "--save-every", "1", "--resume"]) == 0
    assert_same_weights(out / "checkpoint.pt", reference)


def test_a_second_signal_stops_at_once_keeping_the_last_checkpoint(tmp_path):
    """SIGINT during step 3, then SIGTERM in the middle of the save it causes: that save is
    abandoned, step 2's checkpoint stays, and the message says so."""
    out = tmp_path / "run"
    proc = harness(out, "--save-every", "2", fault="SIGINT@step:3,SIGTERM@save:2")
    assert proc.returncode == 143, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert "stopped at once; the last complete checkpoint is" in proc.stderr
    assert "(step 2)" in proc.stderr
    assert load_checkpoint(out / "checkpoint.pt")["step"] == 2
    assert list(out.glob(".*.tmp")) == []  # the abandoned write removed itself
