"""Stopping, as a user meets it: tiny training runs as subprocesses, stopped by SIGINT, SIGTERM
or SIGKILL at a chosen step or in the middle of a checkpoint write (``tests/fault_harness.py``
injects them), then resumed. The stopped run finishes its step, writes a checkpoint and
prints the command that resumes, in one line and without a traceback; the resumed run ends
with the very weights of an uninterrupted one. Ctrl-C while PyTorch is still importing ends
the command in one line too."""

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from transformer_lib import train as train_cli
from transformer_lib.checkpoint import load_checkpoint

from conftest import TINY_DATES

ROOT = Path(__file__).resolve().parents[1]
HARNESS = str(ROOT / "tests" / "fault_harness.py")
FLAGS = [*TINY_DATES, "--steps", "6"]


def harness(out: Path, *flags: str, fault: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "FAULT": fault, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, HARNESS, *FLAGS, "--out", str(out), *flags]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The weights of an uninterrupted run of the same 6 steps (run in this process, as are
    the resumed runs below)."""
    out = tmp_path_factory.mktemp("reference")
    threads = torch.get_num_threads()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        assert train_cli.main([*FLAGS, "--out", str(out), "--save-every", "2"]) == 0
    finally:
        torch.set_num_threads(threads)
        for s, handler in handlers.items():
            signal.signal(s, handler)
    return load_checkpoint(out / "checkpoint.pt")["model"]


def resume_as_printed(line: str, reference) -> None:
    """Run the command the stopped run printed; it must end with the reference weights."""
    command = shlex.split(line.split("Resume with: ", 1)[1])
    assert command[:3] == ["python", "-m", "transformer_lib.train"] and "--resume" in command
    assert train_cli.main(command[3:]) == 0
    out = Path(command[command.index("--out") + 1])
    assert list(out.glob(".*.tmp")) == []  # what a killed write left is gone
    got = load_checkpoint(out / "checkpoint.pt")
    assert got["step"] == 6
    assert all(torch.equal(t, reference[name]) for name, t in got["model"].items())


# signal, moment, --save-every, exit status, step of the checkpoint left behind
MATRIX = [
    ("SIGINT", "step:3", "2", 130, 3),
    ("SIGTERM", "step:5", "0", 143, 5),  # no periodic saves: one is written anyway
    ("SIGINT", "save:2", "2", 130, 4),  # the save of step 4 completes, then it stops
]


@pytest.mark.parametrize("name, moment, save_every, status, left", MATRIX)
def test_a_signal_finishes_the_step_saves_and_resumes_to_the_same_weights(
    tmp_path, reference, name, moment, save_every, status, left
):
    proc = harness(tmp_path, "--save-every", save_every, fault=f"{name}@{moment}")
    assert proc.returncode == status, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and list(tmp_path.glob(".*.tmp")) == []
    assert load_checkpoint(tmp_path / "checkpoint.pt")["step"] == left
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{name}: stopped after step {left} of 6") and "Resume with:" in last
    resume_as_printed(last, reference)


def test_sigkill_in_the_middle_of_a_write_leaves_the_previous_checkpoint(tmp_path, reference):
    proc = harness(tmp_path, "--save-every", "2", fault="SIGKILL@save:2")
    assert proc.returncode == -signal.SIGKILL
    assert load_checkpoint(tmp_path / "checkpoint.pt")["step"] == 2
    assert len(list(tmp_path.glob(".checkpoint.pt.*.tmp"))) == 1  # the half-written file
    resume_as_printed(
        f"Resume with: python -m transformer_lib.train {shlex.join(FLAGS)} "
        f"--out {tmp_path} --save-every 2 --resume",
        reference,
    )


def test_a_second_signal_stops_at_once_keeping_the_last_complete_checkpoint(tmp_path):
    """SIGINT in step 3, then SIGTERM in the middle of the save it causes: that save is
    abandoned, step 2's checkpoint stays, and the message says so."""
    proc = harness(tmp_path, "--save-every", "2", fault="SIGINT@step:3,SIGTERM@save:2")
    assert proc.returncode == 143, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("stopped at once") and "(step 2)" in last and "--resume" in last
    assert load_checkpoint(tmp_path / "checkpoint.pt")["step"] == 2
    assert list(tmp_path.glob(".*.tmp")) == []  # the abandoned write removed itself


def test_ctrl_c_while_pytorch_imports_ends_in_one_line(tmp_path):
    """SIGINT at several moments of the command's start: exit 130 with one line, never a
    traceback, an abort or a run that trains on. The moments count from when the command's
    module is loaded (timed here first: the interpreter's start and that import), from
    which its first line installs the handlers; a signal before is Python's own affair."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import transformer_lib.train"], check=True, cwd=ROOT)
    loaded = time.perf_counter() - start
    counted = 0
    for i, delay in enumerate((0.05, 0.1, 0.2, 0.35, 0.6, 1.0)):
        cmd = [
            sys.executable,
            "-m",
            "transformer_lib.train",
            *TINY_DATES,
            "--steps",
            "300",
            "--out",
            str(tmp_path / str(i)),
        ]
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        time.sleep(loaded + delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        if proc.returncode == -signal.SIGINT and not err or "init_import_site" in err:
            continue  # the interpreter's own start-up, slower this time
        counted += 1
        assert proc.returncode == 130, (delay, proc.returncode, err[-2000:])
        assert "Traceback" not in err and "trained steps" not in out, (delay, err[-2000:])
        lines = err.strip().splitlines()
        assert lines[-1].startswith("SIGINT: "), (delay, err)
        assert len(lines) == 1 or "Resume with:" in lines[-1], (delay, err)  # or it trained
    assert counted >= 3  # most tries land after the interpreter has started
