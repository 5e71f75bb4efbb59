"""The training command line checks what it can before training, and says in one line
what went wrong and how to go on (transformer_lib.cli.train_command, train_checks, stopping)."""

from pathlib import Path

import pytest
import torch

from transformer_lib.cli import stopping
from transformer_lib.cli import train_command as train_cli
from transformer_lib.training import trainer as trainer_mod
from transformer_lib.training.checkpoint import load_checkpoint

from cli_runs import DATES, TINY, no_training, restore_threads  # noqa: F401


def tsv(path: Path, lines) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def usage_error(capsys, argv) -> str:
    """Run the command line; it must stop with exit 2 and one error line, returned."""
    with pytest.raises(SystemExit) as info:
        train_cli.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    return err[-1]


def corpus_args(tmp_path, train=None, valid=None):
    train = train or tsv(tmp_path / "train.tsv", [f"a{i} b{i}\tx{i} y{i}" for i in range(30)])
    valid = valid or tsv(tmp_path / "valid.tsv", ["a1 b2\tx1 y2", "a3\tx3"])
    return ["--train-file", str(train), "--valid-file", str(valid), *TINY, "--steps", "1"]


def test_out_naming_an_existing_file(tmp_path, capsys, no_training):
    (tmp_path / "runs").write_text("notes")
    err = usage_error(capsys, [*DATES, "--out", str(tmp_path / "runs")])
    assert "--out" in err and "is a file, not a folder" in err


def test_validation_file_that_never_fits(tmp_path, capsys, no_training):
    long = " ".join(f"w{i}" for i in range(40))
    valid = tsv(tmp_path / "valid.tsv", [f"{long}\tx", f"{long} {long}\ty"])
    err = usage_error(
        capsys,
        [
            *corpus_args(tmp_path, valid=valid),
            "--max-len",
            "24",
            "--vocab-size",
            "60",
            "--out",
            str(tmp_path / "r"),
        ],
    )
    assert f"--valid-file {valid}: none of its 2 sources fits" in err and "max_len=24" in err


@pytest.mark.parametrize(
    "line,message",
    [
        ("no tab here", "--train-file: {}, line 2: expected 'source<TAB>target'"),
        ("\tonly target", "--train-file: {}, line 2: the source side is empty"),
    ],
)
def test_corpus_errors_name_flag_file_and_line(tmp_path, capsys, no_training, line, message):
    train = tsv(tmp_path / "train.tsv", ["a\tb", line])
    err = usage_error(capsys, [*corpus_args(tmp_path, train=train), "--out", str(tmp_path / "r")])
    assert message.format(train) in err


def test_model_size_errors_are_usage_errors(tmp_path, capsys, no_training):
    err = usage_error(
        capsys, [*DATES, "--d-model", "30", "--heads", "4", "--out", str(tmp_path / "r")]
    )
    assert "--d-model 30" in err and "--heads 4" in err and "divisible" in err


def test_no_training_pair_fits(tmp_path, capsys, no_training):
    err = usage_error(capsys, [*DATES, "--max-len", "4", "--out", str(tmp_path / "r")])
    assert "--task dates: no training pair fits the model's max_len=4" in err


def test_vocab_size_below_what_the_corpus_needs_gets_a_note(tmp_path, capsys):
    assert (
        train_cli.main([*corpus_args(tmp_path), "--vocab-size", "8", "--out", str(tmp_path / "r")])
        == 0
    )
    out = capsys.readouterr().out
    assert "note: --vocab-size 8 is below what the corpus needs" in out
    vocab = load_checkpoint(tmp_path / "r" / "checkpoint.pt")["config"]["src_vocab_size"]
    assert f"the vocabulary has {vocab} tokens" in out and vocab > 8


def test_vocab_size_that_leaves_no_room_is_refused(tmp_path, capsys, no_training):
    err = usage_error(
        capsys, [*corpus_args(tmp_path), "--vocab-size", "4", "--out", str(tmp_path / "r")]
    )
    assert "--vocab-size must be > 4" in err


@pytest.mark.parametrize("device", ["cuda", "cuda:3"])
def test_device_cuda_without_cuda(tmp_path, capsys, no_training, device):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    err = usage_error(capsys, [*DATES, "--device", device, "--out", str(tmp_path / "r")])
    assert f"--device {device}: this machine has no CUDA GPU" in err


def test_override_needs_resume(tmp_path, capsys, no_training):
    assert "--override only applies with --resume" in usage_error(
        capsys, [*DATES, "--override", "--out", str(tmp_path / "r")]
    )


@pytest.fixture
def two_steps(tmp_path):
    out = tmp_path / "run"
    assert train_cli.main([*DATES, "--steps", "2", "--out", str(out)]) == 0
    return out


def test_resume_with_other_flags_is_refused_with_the_list(two_steps, capsys, monkeypatch):
    capsys.readouterr()
    monkeypatch.setattr(trainer_mod.Trainer, "fit", lambda self: pytest.fail("trained"))
    err = usage_error(
        capsys,
        [
            *DATES,
            "--steps",
            "4",
            "--seed",
            "1",
            "--max-tokens",
            "300",
            "--out",
            str(two_steps),
            "--resume",
        ],
    )
    assert "--seed 1 (checkpoint: 0)" in err and "--max-tokens 300 (checkpoint: 150)" in err
    assert "--override" in err and "--steps" in err and "may change" in err
    err = usage_error(
        capsys, [*DATES, "--steps", "4", "--n-train", "80", "--out", str(two_steps), "--resume"]
    )
    assert "--n-train 80 (checkpoint: 60)" in err
    err = usage_error(
        capsys, [*DATES, "--steps", "4", "--d-model", "32", "--out", str(two_steps), "--resume"]
    )
    assert "--d-model 32 (checkpoint: 16)" in err and "fixes the model" in err
    err = usage_error(
        capsys, [*DATES, "--steps", "4", "--norm-first", "--out", str(two_steps), "--resume"]
    )
    assert "--norm-first True (checkpoint: False)" in err and "fixes the model" in err


def test_norm_first_trains_a_pre_norm_model(tmp_path):
    out = tmp_path / "pre"
    assert train_cli.main([*DATES, "--steps", "2", "--norm-first", "--out", str(out)]) == 0
    ck = load_checkpoint(out / "checkpoint.pt")
    assert ck["config"]["norm_first"] is True
    assert any(name.startswith("encoder.norm.") for name in ck["model"])  # the final LayerNorm


def test_resume_with_override_goes_on_and_says_so(two_steps, capsys):
    capsys.readouterr()
    assert (
        train_cli.main(
            [
                *DATES,
                "--steps",
                "3",
                "--seed",
                "1",
                "--out",
                str(two_steps),
                "--resume",
                "--override",
            ]
        )
        == 0
    )
    assert "note: --override: continuing with --seed 1 (checkpoint: 0)" in capsys.readouterr().out
    ck = load_checkpoint(two_steps / "checkpoint.pt")
    assert ck["step"] == 3 and ck["settings"]["seed"] == 1


def test_resume_of_a_damaged_checkpoint(two_steps, capsys):
    path = two_steps / "checkpoint.pt"
    data = bytearray(path.read_bytes())
    w = load_checkpoint(path)["model"]["encoder.layers.0.feed_forward.w_1.weight"]
    at = bytes(data).find(w.numpy().tobytes()[:64])
    data[at + 5] ^= 0x40
    path.write_bytes(bytes(data))
    err = usage_error(capsys, [*DATES, "--steps", "3", "--out", str(two_steps), "--resume"])
    assert f"--resume: {path} is damaged" in err


def test_resume_of_a_file_that_is_not_a_checkpoint(tmp_path, capsys):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "checkpoint.pt").write_text("hello")
    err = usage_error(capsys, [*DATES, "--out", str(tmp_path / "r"), "--resume"])
    assert "is not a checkpoint" in err and "weights_only" not in err


def test_disk_full_keeps_the_last_checkpoint_and_says_how_to_resume(tmp_path, capsys, monkeypatch):
    real, calls = trainer_mod.save_checkpoint, []

    def save(path, state):
        calls.append(state["step"])
        if state["step"] == 4:
            raise OSError(28, "No space left on device")
        real(path, state)

    monkeypatch.setattr(trainer_mod, "save_checkpoint", save)
    out = tmp_path / "r"
    code = train_cli.main([*DATES, "--steps", "6", "--save-every", "2", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1 and "No space left on device" in err
    assert f"the last complete checkpoint is {out / 'checkpoint.pt'} (step 2)" in err
    assert "resume with: python -m transformer_lib.train" in err and "--resume" in err
    assert load_checkpoint(out / "checkpoint.pt")["step"] == 2


def test_interrupted_before_training(tmp_path, capsys, monkeypatch):
    def interrupted(*a):
        raise KeyboardInterrupt

    monkeypatch.setattr(train_cli, "prepare", interrupted)
    assert train_cli.main([*DATES, "--out", str(tmp_path / "r")]) == 130
    err = capsys.readouterr().err
    assert "SIGINT: stopped before training wrote a checkpoint" in err and "Traceback" not in err


def test_resume_command_adds_resume_and_drops_force():
    cmd = stopping.resume_command(["--task", "dates", "--out", "runs/a b", "--force"])
    assert cmd == "python -m transformer_lib.train --task dates --out 'runs/a b' --resume"
    assert stopping.resume_command(["--resume", "--steps", "9"]).endswith("--resume --steps 9")
    assert stopping.exit_code(2) == 130 and stopping.exit_code(15) == 143


def test_time_budget_stops_cleanly_scores_the_test_set_and_resumes(tmp_path, capsys):
    out = tmp_path / "r"
    args = [*DATES, "--steps", "50", "--out", str(out)]
    assert train_cli.main([*args, "--time-budget", "0.000001"]) == 0
    printed = capsys.readouterr().out
    ckpt = load_checkpoint(out / "checkpoint.pt")
    assert ckpt["step"] == 1
    assert "time budget of 1e-06 min spent: stopped after step 1 of 50" in printed
    assert "--resume" in printed and "test: exact match" in printed
    assert train_cli.main([*args, "--steps", "3", "--resume"]) == 0
    assert load_checkpoint(out / "checkpoint.pt")["step"] == 3


@pytest.mark.parametrize("value", ["0", "-2", "nan", "soon"])
def test_time_budget_must_be_a_positive_number(tmp_path, capsys, value):
    with pytest.raises(SystemExit):
        train_cli.main([*DATES, "--time-budget", value, "--out", str(tmp_path / "r")])
    assert "--time-budget" in capsys.readouterr().err
