"""Training (§5): label smoothing and the schedule against their formulas; the Trainer learns,
resumes bit for bit, averages its last snapshots (§6.1), stops on a time budget or a signal
with a checkpoint, cools down, names the settings when the loss diverges; prepare(), and
two DDP processes on the CPU."""

import dataclasses
import math
import os
import platform
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from transformer_lib.batching import make_batch
from transformer_lib.checkpoint import load_checkpoint
from transformer_lib.config import TransformerConfig
from transformer_lib.model import Transformer
from transformer_lib.search import translate
from transformer_lib.tokenizers import CharTokenizer
from transformer_lib.training import (
    LabelSmoothingLoss,
    TrainConfig,
    Trainer,
    adam,
    bleu,
    cooldown_scale,
    exact_match,
    noam_lr,
    prepare,
    resume_differences,
    smoothed_targets,
)

ROOT = Path(__file__).resolve().parents[1]


# label smoothing (§5.4) ---------------------------------------------------------------------
def test_label_smoothing_by_hand():
    # V = 4 with padding 0: eps = 0.3 spread over the 3 other classes, 0.1 each
    logits = torch.tensor([[[0.0, 1.0, 2.0, 3.0], [0.0, 0.0, 0.0, 0.0]]])
    target = torch.tensor([[3, 0]])  # the second position is padding
    log_p = torch.log_softmax(logits[0, 0], -1)
    q = torch.tensor([0.0, 0.1, 0.1, 0.8])
    torch.testing.assert_close(smoothed_targets(target, 4, 0.3)[0, 0], q)
    assert torch.all(smoothed_targets(target, 4, 0.3)[0, 1] == 0)  # a padded row: no target
    loss = LabelSmoothingLoss(0.3, pad_id=0)(logits, target)
    torch.testing.assert_close(loss, -(q * log_p).sum())


def test_smoothed_targets_are_distributions_without_mass_on_padding():
    target = torch.randint(1, 9, (5, 7))
    q = smoothed_targets(target, 9, 0.1)
    torch.testing.assert_close(q.sum(-1), torch.ones(5, 7))
    assert torch.all(q[..., 0] == 0) and torch.all(q.argmax(-1) == target)


def test_label_smoothing_equals_pytorch_without_a_padding_class():
    logits, target = torch.randn(3, 5, 11), torch.randint(0, 11, (3, 5))
    for eps in (0.0, 0.1, 0.4):
        expected = F.cross_entropy(logits.flatten(0, 1), target.flatten(), label_smoothing=eps)
        torch.testing.assert_close(LabelSmoothingLoss(eps, pad_id=None)(logits, target), expected)
    expected = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0)
    torch.testing.assert_close(LabelSmoothingLoss(0.0, pad_id=0)(logits, target), expected)


def test_padded_target_positions_do_not_change_the_loss():
    logits, target = torch.randn(2, 6, 9), torch.randint(1, 9, (2, 6))
    target[0, 4:] = 0
    loss = LabelSmoothingLoss(0.1)(logits, target)
    noise = logits.clone()
    noise[0, 4:] = torch.randn(2, 9) * 100
    torch.testing.assert_close(LabelSmoothingLoss(0.1)(noise, target), loss)
    torch.testing.assert_close(
        LabelSmoothingLoss(0.1)(logits[:1, :4], target[:1, :4]) * 4 / 10
        + LabelSmoothingLoss(0.1)(logits[1:], target[1:]) * 6 / 10,
        loss,
    )


def test_label_smoothing_is_smallest_at_q_where_it_is_q_s_entropy():
    target = torch.randint(1, 9, (2, 5))
    q = smoothed_targets(target, 9, 0.1)
    best = torch.where(q > 0, q, torch.tensor(1e-30)).log()  # logits whose softmax is q
    entropy = -(q * q.clamp_min(1e-30).log()).sum(-1).mean()
    loss = LabelSmoothingLoss(0.1)
    torch.testing.assert_close(loss(best, target), entropy)
    assert all(loss(best + torch.randn_like(best) * 0.1, target) > entropy for _ in range(5))


# the schedule (§5.3), cool-down, Adam, scores ------------------------------------------------
@pytest.mark.parametrize("d_model, warmup", [(512, 4000), (64, 200)])
def test_noam_lr_is_equation_3(d_model, warmup):
    for step in (1, warmup // 2, warmup, 3 * warmup, 100000):
        expected = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert noam_lr(step, d_model, warmup) == pytest.approx(expected, rel=1e-12)
    rates = [noam_lr(s, d_model, warmup) for s in range(1, 3 * warmup)]
    assert rates.index(max(rates)) + 1 == warmup  # linear warm-up, then 1/sqrt(step)
    assert noam_lr(warmup, d_model, warmup, factor=2.0) == pytest.approx(2 * max(rates))


def test_cooldown_scale_is_one_then_a_line_down_to_zero():
    assert [cooldown_scale(d, 0.5) for d in (0.0, 0.5, 0.75, 1.0)] == [1.0, 1.0, 0.5, 0.0]
    assert cooldown_scale(0.99, 0.0) == 1.0


def test_adam_has_the_paper_s_settings():
    opt = adam(torch.nn.Linear(3, 3))
    group = opt.param_groups[0]
    assert (group["betas"], group["eps"]) == ((0.9, 0.98), 1e-9)


def test_exact_match_and_bleu():
    assert exact_match(["a b", " c "], ["a b", "d"]) == 0.5
    assert bleu(["the cat sat on the mat"], ["the cat sat on the mat"]) == pytest.approx(100)
    assert bleu(["2021-03-05"], ["2021-03-06"], tokenize="char") > 50


# the Trainer ---------------------------------------------------------------------------------
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


def make_trainer(path=None, p_drop=0.1, **settings):
    torch.manual_seed(0)
    tok = CharTokenizer.train([s for s, _ in PAIRS] + [t for _, t in PAIRS])
    model = Transformer(TransformerConfig.tiny(tok.vocab_size, P_drop=p_drop, max_len=32))
    config = TrainConfig(
        task="dates",
        **{
            "steps": 6,
            "max_tokens": 40,
            "warmup": 3,
            "eval_limit": 4,
            "decode_max_len": 8,
            "progress": False,
            "verbose": False,
            **settings,
        },
    )
    examples = [(tok.encode(s), tok.encode(t)) for s, t in PAIRS]
    return Trainer(model, tok, examples, PAIRS[:4], config, path, "cpu")


def same_weights(a, b):
    b = b.state_dict()
    return all(torch.equal(p, b[n]) for n, p in a.state_dict().items())


def test_the_trainer_overfits_a_batch_and_validation_agrees():
    trainer = make_trainer(p_drop=0.0, label_smoothing=0.0)
    batch = make_batch(trainer.train_examples)
    losses = [trainer.train_step(batch, 3e-3) for _ in range(80)]
    assert losses[0] > 2.0 and losses[-1] < 0.02
    v = trainer.validate()
    assert trainer.model.training  # validation puts it back
    hyps = translate(trainer.model, trainer.tokenizer, [s for s, _ in PAIRS[:4]], max_len=8)
    assert v["exact_match"] == exact_match(hyps, [t for _, t in PAIRS[:4]]) == 1.0
    with torch.no_grad():
        b = make_batch(trainer.valid_examples)
        expected = trainer.criterion(trainer.model.eval()(b.src, b.tgt_in), b.tgt_out)
    assert v["loss"] == pytest.approx(expected.item(), rel=1e-5)


def test_resume_takes_the_same_steps_bit_for_bit(tmp_path):
    uninterrupted = make_trainer(steps=10)
    full = uninterrupted.fit()  # several epochs: batches are reshuffled
    make_trainer(tmp_path / "c.pt", steps=4).fit()  # saves at its last step
    torch.manual_seed(1234)  # the checkpoint must undo this
    second = make_trainer(tmp_path / "c.pt", steps=10)
    second.resume()
    resumed = second.fit()
    assert resumed["loss"] == full["loss"] and resumed["lr"] == full["lr"]  # float equality
    assert resumed["step"] == list(range(1, 11)) and same_weights(second.model, uninterrupted.model)


def snapshots_of(steps, stops):
    trainer, out = make_trainer(steps=steps), []
    for stop in stops:
        trainer.config = trainer.config.replace(steps=stop)
        trainer.fit()
        out.append({n: p.detach().clone() for n, p in trainer.model.named_parameters()})
    return trainer, out


def test_weight_averaging_gives_the_mean_of_the_last_snapshots():
    plain, snapshots = snapshots_of(6, (2, 4, 6))
    averaged = make_trainer(steps=6, average_last=3, average_every=2)
    history = averaged.fit()
    for name, p in averaged.model.named_parameters():
        torch.testing.assert_close(p, sum(s[name] for s in snapshots) / 3, rtol=1e-6, atol=1e-7)
        assert not torch.equal(p, snapshots[-1][name])
    assert history["loss"] == plain.history["loss"]  # training itself unchanged


def crash_after(trainer, k):
    """The trainer's fit raises KeyboardInterrupt (a crash) once step ``k`` is done."""
    step = trainer.train_step

    def train_step(*args):
        if trainer.step == k:
            raise KeyboardInterrupt
        return step(*args)

    trainer.train_step = train_step
    with pytest.raises(KeyboardInterrupt):
        trainer.fit()


def test_resume_inside_the_averaging_window_is_exact(tmp_path):
    kw = dict(steps=10, average_last=3, average_every=2)  # snapshots at steps 6, 8, 10
    uninterrupted = make_trainer(**kw)
    uninterrupted.fit()
    crash_after(make_trainer(tmp_path / "c.pt", save_every=7, **kw), 7)
    assert load_checkpoint(tmp_path / "c.pt")["snapshots"]["steps"] == [6]
    second = make_trainer(tmp_path / "c.pt", **kw)
    second.resume()
    second.fit()
    assert same_weights(second.model, uninterrupted.model)


def test_a_signal_during_fit_stops_after_the_step_with_a_checkpoint(tmp_path):
    trainer = make_trainer(tmp_path / "c.pt", steps=10)
    step = trainer.train_step

    def signal_in_step_4(*args):
        if trainer.step == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return step(*args)

    trainer.train_step = signal_in_step_4
    handler = signal.getsignal(signal.SIGINT)
    trainer.fit()
    assert trainer.step == 4 and trainer.stop_signal == signal.SIGINT and trainer.saved_step == 4
    assert load_checkpoint(tmp_path / "c.pt")["step"] == 4
    assert signal.getsignal(signal.SIGINT) is handler  # restored


def test_a_time_budget_stops_cleanly_with_a_checkpoint(tmp_path):
    trainer = make_trainer(tmp_path / "c.pt", steps=20, time_budget=1e-9)
    trainer.fit()
    assert trainer.step == 1 and trainer.budget_spent and trainer.saved_step == 1
    assert load_checkpoint(tmp_path / "c.pt")["step"] == 1


def test_the_cooldown_scales_eq_3_down_to_zero_and_resumes_exactly(tmp_path):
    history = make_trainer(steps=10, cooldown=0.5).fit()
    expected = [noam_lr(s, 32, 3) * cooldown_scale((s - 1) / 10, 0.5) for s in range(1, 11)]
    assert history["lr"] == pytest.approx(expected, rel=1e-12)
    crash_after(make_trainer(tmp_path / "c.pt", steps=10, cooldown=0.5, save_every=7), 7)
    second = make_trainer(tmp_path / "c.pt", steps=10, cooldown=0.5)
    second.resume()
    assert second.fit()["lr"] == history["lr"]


def test_a_diverging_loss_names_lr_factor_and_warmup():
    trainer = make_trainer(steps=3)
    criterion = trainer.criterion
    trainer.criterion = lambda logits, target: criterion(logits, target) * float("nan")
    with pytest.raises(FloatingPointError, match="lr_factor.*warmup"):
        trainer.fit()


def test_history_and_checkpoint_hold_what_a_resume_needs(tmp_path):
    history = make_trainer(tmp_path / "c.pt", steps=4, eval_every=2).fit()
    assert history["val_step"] == [2, 4] and history["step"] == [1, 2, 3, 4]
    assert all(0.0 <= em <= 1.0 for em in history["val_exact_match"])
    ck = torch.load(tmp_path / "c.pt", weights_only=True)
    assert {
        "config",
        "run",
        "model",
        "optimizer",
        "step",
        "epoch",
        "position",
        "rng",
        "history",
        "snapshots",
        "tokenizer",
        "extra",
        "checksum",
    } <= set(ck)
    assert ck["step"] == 4 and ck["run"]["eval_every"] == 2


def test_bf16_autocast_steps_train_float32_weights():
    history = make_trainer(steps=3, bf16=True).fit()
    assert all(math.isfinite(x) for x in history["loss"])


def test_resume_differences_leave_out_what_a_resumed_run_may_change():
    base = TrainConfig(task="dates")
    stored = dataclasses.asdict(base)
    assert resume_differences(stored, base.replace(steps=9, eval_every=5, time_budget=2.0)) == {}
    assert resume_differences(stored, base.replace(warmup=7, d_model=64)) == {
        "warmup": (7, 400),
        "d_model": (64, None),
    }
    model = base.replace(d_model=48, heads=3, positions="learned", d_k=20).model_config(30)
    assert (model.d_model, model.h, model.positions, model.d_k, model.N) == (
        48,
        3,
        "learned",
        20,
        2,
    )


def test_prepare_builds_a_ready_run_and_says_what_it_left_out():
    config = TrainConfig(
        task="dates",
        n_train=200,
        n_valid=10,
        n_test=10,
        max_len=14,
        max_tokens=100,
        progress=False,
        verbose=False,
    )
    run = prepare(config, device="cpu")
    trainer = run.trainer
    assert len(trainer.train_examples) < 200 and len(run.test_pairs) <= 10
    assert any(note.startswith("train:") and "max_len=14" in note for note in run.notes)
    assert trainer.model.config.max_len == 14 and trainer.model.config.src_vocab_size == len(
        trainer.tokenizer
    )
    again = prepare(config, device="cpu").trainer
    assert same_weights(again.model, trainer.model)  # seeded by config.seed
    with pytest.raises(ValueError, match="max_tokens"):
        prepare(config.replace(max_tokens=5), device="cpu")


@pytest.mark.skipif(
    not (dist.is_available() and dist.is_gloo_available()), reason="no gloo backend in this PyTorch"
)
def test_two_ddp_processes_on_the_cpu_agree_on_their_steps(tmp_path):
    flags = "--task dates --n-train 300 --n-valid 4 --n-test 4 --d-model 16 --d-ff 32 --layers 1 "
    flags += "--heads 2 --max-tokens 200 --steps 3 --cooldown 0.5 --eval-limit 4 --device cpu "
    flags += "--threads 1 --no-progress --no-compiled-kernels --no-keep-freed-memory"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--standalone",
        "-m",
        "transformer_lib.train",
        *flags.split(),
        "--out",
        str(tmp_path),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]  # rank 0 writes
    ck = load_checkpoint(tmp_path / "checkpoint.pt")
    assert ck["step"] == 3 and proc.stdout.count("checkpoint:") == 1  # rank 0 prints
    # step 3 starts after 2/3 of the run: the cool-down factor both processes agreed on
    assert ck["history"]["lr"][2] == pytest.approx(noam_lr(3, 16, 400) * (1 - 2 / 3) / 0.5)


PAGE_FAULTS = """
import resource, sys, torch
from transformer_lib.training import keep_freed_memory
sizes = [1536 * 1024, 1536 * 256, 1536 * 1000, 1536 * 768] * 4  # a step's activations
faults = []
for keep in (False, True):
    if keep:
        keep_freed_memory()
    for _ in range(3):  # the last of three steps, all freed at the step's end
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        xs = [torch.ones(n) for n in sizes]
        del xs
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(*faults)
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="glibc only"
)
def test_keep_freed_memory_reuses_a_step_s_memory_without_page_faults():
    run = subprocess.run(
        [sys.executable, "-c", PAGE_FAULTS],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=True,
    )
    default, kept = map(int, run.stdout.split())
    assert kept <= max(100, default // 10), (default, kept)
