"""Bad input to the command lines (train, translate, the site builder) is answered before
any work starts, in one usage line naming the flag (exit 2, no traceback), or handled as
the README says: warnings for what translate cannot read as given, a closed pipe ending
quietly, Ctrl-C honoured from the first line of the command to its exit."""

import io
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from transformer_lib.cli import corpus_command as corpus_cli
from transformer_lib.cli import export_command as export_cli
from transformer_lib.cli import train_command as train_cli
from transformer_lib.cli import translate_command as translate_cli
from transformer_lib.training.checkpoint import load_checkpoint
from transformer_lib.training.job import DataSpec

from cli_runs import DATES, TINY, no_training, restore_threads, tiny_checkpoint  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]


def usage_error(capsys, main, argv) -> str:
    """Run a command line's main: exit 2, no traceback; return its last stderr line."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    return err[-1]


# -------------------------------------------------------------------------- train
TRAIN_CASES = [  # flags added to DATES, what the usage line must say
    (["--lr-factor", "nan"], "argument --lr-factor: must be a finite number, got nan"),
    (["--lr-factor", "inf"], "argument --lr-factor: must be a finite number, got inf"),
    (["--lr-factor", "0"], "argument --lr-factor: must be in (0.0, inf], got 0.0"),
    (["--dropout", "nan"], "argument --dropout: must be a finite number, got nan"),
    (["--label-smoothing", "1"], "argument --label-smoothing: must be in [0.0, 1.0), got 1.0"),
    (["--cooldown", "1.5"], "argument --cooldown: must be in [0.0, 1.0], got 1.5"),
    (
        ["--max-tokens", "1"],
        "--max-tokens 1 is below the 30 tokens the longest train pair "
        "needs in a batch; give at least 30",
    ),
    (["--max-tokens", "29"], "--max-tokens 29 is below the 30 tokens"),
    (["--max-len", "1"], "argument --max-len: must be at least 2, got 1"),
    (["--max-len", "100000000"], "argument --max-len: must be at most 65536, got 100000000"),
    (["--seed", "-1"], "argument --seed: must be at least 0, got -1"),
    (["--seed", "99999999999"], "argument --seed: must be at most 4294967295, got 99999999999"),
    (["--seed", "1.5"], "argument --seed: must be an integer, got '1.5'"),
    (
        ["--n-valid", "40000"],
        "--n-valid 40000 (with n_test=4): n_test + n_valid = 40004 leaves no day for training",
    ),
    (
        ["--device", "meta"],
        "--device meta: the model runs on cpu, cuda[:N] or mps, not on 'meta' devices",
    ),
    (["--device", "nope"], "--device: 'nope' is not a device PyTorch knows"),
    (["--name", ""], "--name must be a file name (the checkpoint goes into --out), got ''"),
    (
        ["--name", "a/b.pt"],
        "--name must be a file name (the checkpoint goes into --out), got 'a/b.pt'",
    ),
]


@pytest.mark.parametrize("flags,message", TRAIN_CASES, ids=[" ".join(c[0]) for c in TRAIN_CASES])
def test_train_refuses_bad_flags_before_training(tmp_path, capsys, no_training, flags, message):
    err = usage_error(capsys, train_cli.main, [*DATES, *flags, "--out", str(tmp_path / "r")])
    assert message in err


def test_train_device_mps_without_mps(tmp_path, capsys, no_training):
    if torch.backends.mps.is_available():
        pytest.skip("this machine has an Apple GPU")
    err = usage_error(
        capsys, train_cli.main, [*DATES, "--device", "mps", "--out", str(tmp_path / "r")]
    )
    assert "--device mps: this machine has no Apple GPU (MPS)" in err


def test_train_refuses_an_empty_out(tmp_path, capsys, no_training, monkeypatch):
    monkeypatch.chdir(tmp_path)
    err = usage_error(capsys, train_cli.main, [*DATES, "--out", ""])
    assert "argument --out: must name a folder, got ''" in err
    assert list(tmp_path.iterdir()) == []


def test_train_file_holding_only_a_header_is_refused(tmp_path, capsys, no_training):
    train = tmp_path / "train.tsv"
    train.write_text("source\ttarget\n", encoding="utf-8")
    valid = tmp_path / "valid.tsv"
    valid.write_text("a b\tx y\n", encoding="utf-8")
    err = usage_error(
        capsys,
        train_cli.main,
        [
            "--train-file",
            str(train),
            "--valid-file",
            str(valid),
            *TINY,
            "--out",
            str(tmp_path / "r"),
        ],
    )
    assert f"--train-file: {train} holds only a header line" in err and "no sentence pair" in err


def test_a_header_line_is_not_a_pair(tmp_path):
    train = tmp_path / "train.tsv"
    train.write_text("Source\tTarget\na b\tx y\nc\tz\n", encoding="utf-8")
    pairs = DataSpec(train_file=str(train), valid_file=str(train)).load()
    assert pairs["train"] == [("a b", "x y"), ("c", "z")]


def test_resume_below_the_checkpoint_step_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    assert train_cli.main([*DATES, "--steps", "5", "--out", str(out)]) == 0
    before = (out / "checkpoint.pt").read_bytes()
    capsys.readouterr()
    err = usage_error(
        capsys, train_cli.main, [*DATES, "--steps", "3", "--out", str(out), "--resume"]
    )
    assert (
        f"--resume: the checkpoint {out / 'checkpoint.pt'} is already at step 5, beyond "
        "--steps 3: nothing to train; give --steps above 5 to go on"
    ) in err
    assert (out / "checkpoint.pt").read_bytes() == before
    assert load_checkpoint(out / "checkpoint.pt")["settings"]["steps"] == 5


def test_training_that_diverges_ends_in_one_line(tmp_path, capsys):
    out = tmp_path / "r"
    code = train_cli.main(
        [*DATES, "--steps", "20", "--warmup", "1", "--lr-factor", "1e30", "--out", str(out)]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and "Traceback" not in "\n".join(err)
    assert err[-1].startswith("error: training diverged: loss is nan at step ")
    assert err[-1].endswith("; lower --lr-factor or raise --warmup; no checkpoint was written")


# ---------------------------------------------------------------------- translate
LINES = ["5 March 2021", "03/05/21"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A random tiny model whose source vocabulary holds only the characters of LINES."""
    path = tmp_path_factory.mktemp("ckpt") / "tiny.pt"
    tiny_checkpoint(path, LINES)
    return path


def translate_in_process(monkeypatch, capsys, argv, stdin: bytes):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    code = translate_cli.main(argv)
    return code, capsys.readouterr()


TRANSLATE_CASES = [  # flags, stdin, what the usage line must say
    (
        ["--length-penalty", "-1"],
        b"5 March 2021\n",
        "argument --length-penalty: must be in [0.0, inf], got -1.0",
    ),
    (
        ["--length-penalty", "nan"],
        b"5 March 2021\n",
        "argument --length-penalty: must be a finite number, got nan",
    ),
    (
        ["--length-penalty", "inf"],
        b"5 March 2021\n",
        "argument --length-penalty: must be a finite number, got inf",
    ),
    (["--device", "meta"], b"5 March 2021\n", "--device meta: the model runs on cpu"),
    (
        [],
        b"5 March 2021\n03/05/\xff21\n",
        "stdin, line 2: not UTF-8 text (invalid start byte at byte 6); translate reads UTF-8",
    ),
]


@pytest.mark.parametrize(
    "flags,stdin,message", TRANSLATE_CASES, ids=[" ".join(c[0]) or "stdin" for c in TRANSLATE_CASES]
)
def test_translate_refuses_bad_input(checkpoint, monkeypatch, capsys, flags, stdin, message):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    err = usage_error(capsys, translate_cli.main, ["--checkpoint", str(checkpoint), *flags])
    assert message in err


def test_translate_device_cuda_without_cuda_blames_the_device(checkpoint, monkeypatch, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x\n")))
    err = usage_error(
        capsys, translate_cli.main, ["--checkpoint", str(checkpoint), "--device", "cuda"]
    )
    assert "--device cuda: this machine has no CUDA GPU" in err and "checkpoint" not in err


def test_translate_warns_once_about_cut_lines_and_unknown_characters(
    checkpoint, monkeypatch, capsys
):
    long = "5 March 2021 " * 10  # 130 characters > 16
    stdin = "\n".join(["5 March 2021", long, "5 März 2021", "5 Mürz 2021 ¿"]).encode()
    code, out = translate_in_process(monkeypatch, capsys, ["--checkpoint", str(checkpoint)], stdin)
    assert code == 0 and len(out.out.splitlines()) == 4
    assert out.err.splitlines() == [
        "warning: 1 of 4 lines are longer than the model's max_len (16 tokens) and were cut to it",
        "warning: 2 of 4 lines hold characters outside the vocabulary, read as <unk>: "
        "'ä' 'z' 'ü' '¿'",
    ]


def test_translate_answers_a_line_of_spaces_with_an_empty_line(checkpoint, monkeypatch, capsys):
    code, out = translate_in_process(
        monkeypatch, capsys, ["--checkpoint", str(checkpoint)], b"   \n5 March 2021\n\t \n"
    )
    lines = out.out.split("\n")
    assert code == 0 and lines[0] == "" and lines[2] == "" and out.err == ""


def test_translate_into_a_closed_pipe_ends_quietly(checkpoint):
    """``translate ... | head -1``: the reader is gone before the output is written."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "transformer_lib.translate", "--checkpoint", str(checkpoint)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    proc.stdout.close()
    _, err = proc.communicate(b"5 March 2021\n" * 200, timeout=120)
    assert proc.returncode == 0 and err.decode() == ""


# ------------------------------------------------------------------ Ctrl-C, start and exit
def run_script(body: str) -> subprocess.CompletedProcess:
    script = "import os, signal, sys, time\n" + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_ctrl_c_while_the_command_loads_is_one_line():
    """The first Ctrl-C counts from the command's first line: one that lands while its
    modules load (PyTorch initialising) stops it, in one line with exit 130."""
    result = run_script("""
        from transformer_lib.cli.stopping import run_command

        def load():
            os.kill(os.getpid(), signal.SIGINT)        # as if it landed during the imports
            time.sleep(5)
            raise AssertionError("the signal was swallowed")

        sys.exit(run_command(load, "stopped before training wrote a checkpoint"))
    """)
    assert result.returncode == 130, result.stderr
    assert result.stderr == "SIGINT: stopped before training wrote a checkpoint\n"


def test_the_train_entry_point_honours_ctrl_c_before_main_does():
    result = run_script("""
        import runpy
        from transformer_lib.cli import train_command

        def main():                                    # a signal before main's own handlers
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
            raise AssertionError("the signal was swallowed")

        train_command.main = main
        runpy.run_module("transformer_lib.train", run_name="__main__")
    """)
    assert result.returncode == 130, result.stderr
    assert result.stderr == (
        "SIGINT: stopped before training wrote a checkpoint; nothing to resume\n"
    )


def test_a_signal_at_exit_ends_quietly():
    """A second Ctrl-C that lands while Python runs its exit handlers ends the process at
    once, without 'Exception ignored in atexit callback'."""
    result = run_script("""
        import atexit
        from transformer_lib.cli.stopping import run_command

        def late():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
            print("not reached", file=sys.stderr)

        def main():
            atexit.register(late)
            print("done", flush=True)
            return 130
        sys.exit(run_command(lambda: main, "stopped"))
    """)
    assert result.returncode == 130 and result.stdout == "done\n"
    assert result.stderr == ""


# --------------------------------------------------------------- corpus and export
def test_corpus_and_export_refuse_outputs_they_cannot_write(tmp_path, capsys):
    file = tmp_path / "FILE"
    file.write_text("x")
    for out, message in [
        ("", "argument --out: must name a folder, got ''"),
        (str(file), f"--out {file} is a file, not a folder"),
        (str(file / "sub"), f"--out {file / 'sub'}: cannot create the folder (Not a directory)"),
    ]:
        assert message in usage_error(capsys, corpus_cli.main, ["bible-en-fr", "--out", out])
    checkpoint = ROOT / "checkpoints" / "dates.pt"
    for out, message in [
        (str(tmp_path), f"out: {tmp_path} is a folder; give the file"),
        (str(file / "x.pt"), f"out's folder {file} is a file, not a folder"),
    ]:
        err = usage_error(capsys, export_cli.main, [str(checkpoint), out, "--force"])
        assert message in err


# ------------------------------------------------------------------------ the site
def test_site_out_that_cannot_be_made(tmp_path):
    file = tmp_path / "FILE"
    file.write_text("x")
    for out, message in [
        (file / "sub", f"--out: cannot create {file / 'sub'}: {file} is a file, not a folder"),
        (Path("/proc/nope"), "--out: cannot create /proc/nope"),
    ]:
        result = subprocess.run(
            [sys.executable, "-m", "tools.site.build", "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=ROOT,
        )
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1, result.stderr
        assert lines[0].startswith(f"site: {message}")
