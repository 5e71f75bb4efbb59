"""The training loop: it learns, it resumes exactly, and the command line works end to end."""

import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from transformer_lib import Transformer, TransformerConfig
from transformer_lib.cli import train_command as train_cli
from transformer_lib.data.batching import encode_pairs, make_batch
from transformer_lib.data.tokenizers import CharTokenizer
from transformer_lib.training.checkpoint import load_checkpoint, load_model, save_checkpoint
from transformer_lib.training.trainer import Trainer, TrainSettings

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _one_thread():
    """Small models run fastest on one thread, and a shared CI machine stays responsive."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


PAIRS = [
    ("one two", "1 2"),
    ("three", "3"),
    ("two one three", "2 1 3"),
    ("four one", "4 1"),
    ("three four two", "3 4 2"),
    ("one", "1"),
    ("two two", "2 2"),
    ("four", "4"),
]


def make_trainer(tmp_path=None, steps=6, p_drop=0.1, **kw):
    torch.manual_seed(0)
    tok = CharTokenizer.train([s for s, _ in PAIRS] + [t for _, t in PAIRS])
    model = Transformer(TransformerConfig.tiny(tok.vocab_size, P_drop=p_drop, max_len=32))
    kw = {"warmup": 3, **kw}
    settings = TrainSettings(
        steps=steps,
        max_tokens=40,
        eval_limit=4,
        decode_max_len=8,
        progress=False,
        bleu_tokenize="char",
        checkpoint=str(tmp_path / "c.pt") if tmp_path else None,
        **kw,
    )
    return Trainer(model, tok, tok, encode_pairs(PAIRS, tok, tok), PAIRS[:4], settings, "cpu")


def test_tiny_model_overfits_one_batch():
    trainer = make_trainer(p_drop=0.0, label_smoothing=0.0, lr_factor=0.35, warmup=10)
    batch = make_batch(trainer.train_examples, list(range(len(PAIRS))))
    losses = [trainer.train_step(batch) for _ in range(100)]
    assert losses[-1] < 0.01 and losses[0] > 2.0
    assert trainer.validate()["exact_match"] == 1.0  # greedy decoding reproduces them


def test_resume_gives_the_same_losses_bit_for_bit(tmp_path):
    uninterrupted = make_trainer(steps=10)
    full = uninterrupted.fit()  # several epochs: batches are reshuffled

    first = make_trainer(tmp_path, steps=4)
    first.fit()  # saves at its last step
    torch.manual_seed(1234)  # the checkpoint must undo this
    second = make_trainer(tmp_path, steps=10)
    second.resume()
    resumed = second.fit()
    assert resumed["loss"] == full["loss"]  # exact float equality
    assert resumed["lr"] == full["lr"] and resumed["step"] == list(range(1, 11))
    expected = uninterrupted.model.state_dict()
    for name, p in second.model.state_dict().items():
        assert torch.equal(p, expected[name]), name


def test_weight_averaging_gives_the_mean_of_the_last_snapshots():
    plain = make_trainer(steps=6)
    snapshots = []
    for stop in (2, 4, 6):  # weights after steps 2, 4, 6
        plain.settings = dataclasses.replace(plain.settings, steps=stop)
        plain.fit()
        snapshots.append({n: p.detach().clone() for n, p in plain.model.named_parameters()})
    averaged = make_trainer(steps=6, average_last=3, average_every=2)
    history = averaged.fit()
    for name, p in averaged.model.named_parameters():
        mean = sum(snap[name] for snap in snapshots) / 3
        torch.testing.assert_close(p, mean, rtol=1e-6, atol=1e-7)
        assert not torch.equal(p, snapshots[-1][name])  # not just the last weights
    assert history["loss"] == plain.history["loss"]  # training itself unchanged
    assert averaged.weight_sum == {} and averaged.n_averaged == 0


def test_resume_inside_the_averaging_window_is_exact(tmp_path):
    kw = dict(steps=10, average_last=3, average_every=2)  # snapshots at steps 6, 8, 10
    uninterrupted = make_trainer(**kw)
    uninterrupted.fit()
    first = make_trainer(tmp_path, save_every=7, **kw)
    step = first.train_step

    def crash_after_step_7(batch):
        if first.step == 7:
            raise KeyboardInterrupt
        return step(batch)

    first.train_step = crash_after_step_7
    with pytest.raises(KeyboardInterrupt):
        first.fit()
    assert load_checkpoint(tmp_path / "c.pt")["average"]["count"] == 1  # step 6 is in it
    second = make_trainer(tmp_path, **kw)
    second.resume()
    second.fit()
    expected = uninterrupted.model.state_dict()
    for name, p in second.model.state_dict().items():
        assert torch.equal(p, expected[name]), name


def test_resume_with_a_different_window_starts_the_average_afresh(tmp_path):
    first = make_trainer(tmp_path, steps=7, save_every=7, average_last=3, average_every=2)
    first.fit()  # snapshots at steps 3, 5, 7
    ck = load_checkpoint(tmp_path / "c.pt")
    ck["average"] = {
        "sum": {
            n: p.clone()
            for n, p in first.model.state_dict().items()
            if n in dict(first.model.named_parameters())
        },
        "count": 1,
        "steps": [5],
    }  # as if saved inside that window
    save_checkpoint(tmp_path / "c.pt", ck)
    second = make_trainer(tmp_path, steps=10, average_last=2, average_every=2)  # 8 and 10
    with pytest.warns(UserWarning, match="starting the average afresh"):
        second.resume()
    assert second.weight_sum == {} and second.n_averaged == 0
    same = make_trainer(tmp_path, steps=9, average_last=3, average_every=2)  # 5, 7, 9
    same.resume()  # step 5 is due here too: kept
    assert same.averaged_steps == [5]


@pytest.mark.parametrize("field,value", [("average_last", -1), ("average_every", 0)])
def test_bad_averaging_settings_are_named(field, value):
    with pytest.raises(ValueError, match=field):
        TrainSettings(**{field: value})


def test_history_and_checkpoint_contents(tmp_path):
    history = make_trainer(tmp_path, steps=4, eval_every=2).fit()
    assert history["val_step"] == [2, 4] and len(history["loss"]) == 4
    assert all(0.0 <= em <= 1.0 for em in history["val_exact_match"])
    ck = torch.load(tmp_path / "c.pt", weights_only=True)
    assert {
        "model",
        "optimizer",
        "scheduler",
        "step",
        "rng",
        "config",
        "src_tokenizer",
        "tgt_tokenizer",
        "history",
    } <= set(ck)
    assert ck["step"] == 4 and ck["history"]["val_step"] == [2, 4]


def run_cli(*args, check=True):
    proc = subprocess.run(
        [sys.executable, "-m", "transformer_lib.train", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check and proc.returncode != 0:
        raise AssertionError(proc.stderr[-3000:])
    return proc


CLI_ARGS = [
    "--task",
    "dates",
    "--n-train",
    "300",
    "--n-valid",
    "20",
    "--n-test",
    "20",
    "--d-model",
    "32",
    "--d-ff",
    "64",
    "--max-tokens",
    "400",
    "--warmup",
    "5",
    "--eval-limit",
    "20",
    "--no-progress",
    "--threads",
    "1",
]


def test_cli_trains_then_resumes(tmp_path):
    out = tmp_path / "run"
    proc = run_cli(
        *CLI_ARGS, "--steps", "3", "--out", str(out), "--average-last", "2", "--average-every", "1"
    )
    assert "test: exact match" in proc.stdout
    assert "trained steps 1-3 in " in proc.stdout
    ck = load_checkpoint(out / "checkpoint.pt")
    assert ck["step"] == 3 and ck["extra"]["task"] == "dates"
    assert (ck["settings"]["average_last"], ck["settings"]["average_every"]) == (2, 1)

    again = run_cli(*CLI_ARGS, "--steps", "3", "--out", str(out), check=False)
    assert again.returncode != 0 and "--resume" in again.stderr and "--force" in again.stderr

    resumed = run_cli(*CLI_ARGS, "--steps", "5", "--out", str(out), "--resume")
    assert "trained steps 4-5 in " in resumed.stdout
    ck = load_checkpoint(out / "checkpoint.pt")
    assert ck["step"] == 5 and ck["history"]["step"] == [1, 2, 3, 4, 5]
    model, src_tok, _ = load_model(out / "checkpoint.pt")
    assert not model.training and src_tok.encode("5") != []


@pytest.mark.parametrize(
    "args,message",
    [
        (["--train-file", "nowhere.tsv", "--valid-file", "nowhere.tsv"], "nowhere.tsv"),
        (["--task", "dates", "--train-file", "x.tsv"], "not both"),
        (["--task", "dates", "--steps", "0"], "--steps"),
        (["--task", "dates", "--resume"], "no checkpoint"),
    ],
)
def test_cli_bad_arguments_are_named(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        train_cli.main([*args, "--out", str(tmp_path / "x")])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_bf16_autocast_trains_and_keeps_float32_weights():
    trainer = make_trainer(steps=3, bf16=True)
    history = trainer.fit()
    assert all(math.isfinite(x) for x in history["loss"])
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
    assert trainer.device.type in ("cpu", "cuda")


@pytest.mark.parametrize("flag,calls", [([], 1), (["--no-keep-freed-memory"], 0)])
def test_cli_keeps_freed_memory_unless_told_not_to(tmp_path, monkeypatch, flag, calls):
    import transformer_lib.training.trainer as trainer_module

    made = []
    monkeypatch.setattr(trainer_module, "keep_freed_memory", lambda: made.append(1) or "")
    train_cli.main([*CLI_ARGS, "--steps", "1", "--out", str(tmp_path / "r"), *flag])
    assert len(made) == calls


@pytest.mark.parametrize("keep", [True, False])
def test_fit_keeps_freed_memory_as_its_settings_say(monkeypatch, keep):
    import transformer_lib.training.trainer as trainer_module

    made = []
    monkeypatch.setattr(trainer_module, "keep_freed_memory", lambda: made.append(1) or "")
    trainer = make_trainer(steps=2)
    trainer.settings = dataclasses.replace(trainer.settings, keep_freed_memory=keep)
    trainer.fit()
    assert trainer.step == 2 and len(made) == (1 if keep else 0)
    with pytest.raises(TypeError, match="keep_freed_memory"):
        dataclasses.replace(trainer.settings, keep_freed_memory="yes")


def test_request_stop_ends_fit_after_the_step_with_a_checkpoint(tmp_path):
    trainer = make_trainer(tmp_path, steps=10)  # save_every=0: end only
    step = trainer.train_step

    def stop_during_step_4(batch):
        if trainer.step == 3:
            trainer.request_stop(2)
        return step(batch)

    trainer.train_step = stop_during_step_4
    trainer.fit()
    assert trainer.step == 4 and trainer.stopped_early and trainer.saved_step == 4
    assert load_checkpoint(tmp_path / "c.pt")["step"] == 4


def test_the_final_checkpoint_is_written_before_validation(tmp_path):
    trainer = make_trainer(tmp_path, steps=3)

    def broken_validation():
        assert load_checkpoint(tmp_path / "c.pt")["step"] == 3  # already on disk
        raise IndexError("as sacrebleu on no sentence")

    trainer.validate = broken_validation
    with pytest.raises(IndexError):
        trainer.fit()
    assert load_checkpoint(tmp_path / "c.pt")["step"] == 3


def test_resume_removes_leftovers_of_a_killed_save(tmp_path):
    make_trainer(tmp_path, steps=2).fit()
    (tmp_path / ".c.pt.dead.tmp").write_bytes(b"half a checkpoint")
    trainer = make_trainer(tmp_path, steps=4)
    trainer.resume()
    assert trainer.step == 2 and sorted(p.name for p in tmp_path.iterdir()) == ["c.pt"]


def test_time_budget_stops_after_the_current_step_with_a_checkpoint(tmp_path):
    trainer = make_trainer(tmp_path, steps=20, time_budget=1e-9)
    trainer.fit()
    assert trainer.step == 1 and trainer.budget_spent and trainer.stopped_early
    assert trainer.saved_step == 1
    with pytest.raises(ValueError, match="time_budget"):
        TrainSettings(time_budget=0)


def test_a_diverged_loss_names_the_settings_fields_not_flags(monkeypatch):
    trainer = make_trainer(steps=3)
    monkeypatch.setattr(trainer, "train_step", lambda batch: float("nan"))
    with pytest.raises(FloatingPointError) as e:
        trainer.fit()
    assert str(e.value) == (
        "loss is nan at step 1: lower the settings' lr_factor or raise their warmup"
    )
