"""The learning rate's cool-down before the end of a run (``TrainSettings.cooldown``): by
steps, exact on resume, and by the time budget."""

import itertools
import time

import pytest
import torch

from test_training_trainer import _one_thread, make_trainer  # noqa: F401 (autouse fixture)
from transformer_lib.training.schedule import cooldown_scale, noam_lr
from transformer_lib.training.trainer import TrainSettings


def test_the_scale_is_one_then_a_straight_line_down_to_zero():
    scales = [cooldown_scale(p, 0.2) for p in (0.0, 0.5, 0.8, 0.9, 0.95, 1.0)]
    assert scales == pytest.approx([1.0, 1.0, 1.0, 0.5, 0.25, 0.0])
    assert cooldown_scale(1.5, 0.2) == 0.0  # past the end (a budget overrun): never negative
    assert cooldown_scale(0.99, 0.0) == 1.0  # off


def test_over_the_last_steps_the_rate_falls_from_the_schedules_to_near_zero():
    trainer = make_trainer(steps=10, cooldown=0.5, warmup=3)
    history = trainer.fit()
    d = trainer.model.config.d_model
    # step k runs after k - 1 of the 10 steps: progress (k - 1) / 10
    expected = [noam_lr(k, d, 3) * min(1.0, (1 - (k - 1) / 10) / 0.5) for k in range(1, 11)]
    assert history["lr"] == pytest.approx(expected)
    assert history["lr"][-1] == pytest.approx(noam_lr(10, d, 3) * 0.2)


def test_without_a_cooldown_the_rate_is_the_schedules():
    trainer = make_trainer(steps=6, warmup=3)
    history = trainer.fit()
    d = trainer.model.config.d_model
    assert history["lr"] == pytest.approx([noam_lr(k, d, 3) for k in range(1, 7)])


def test_resume_inside_the_cooldown_is_exact(tmp_path):
    uninterrupted = make_trainer(steps=10, cooldown=0.6)
    full = uninterrupted.fit()
    first = make_trainer(tmp_path, steps=10, cooldown=0.6)
    step = first.train_step

    def step_then_stop(batch):  # a Ctrl-C during step 7, inside the cool-down
        loss = step(batch)
        if first.step == 6:
            first.request_stop()
        return loss

    first.train_step = step_then_stop
    first.fit()
    assert first.stopped_early and first.saved_step == 7
    second = make_trainer(tmp_path, steps=10, cooldown=0.6)
    second.resume()
    resumed = second.fit()
    assert resumed["lr"] == full["lr"] and resumed["loss"] == full["loss"]
    expected = uninterrupted.model.state_dict()
    for name, p in second.model.state_dict().items():
        assert torch.equal(p, expected[name]), name


def test_with_a_time_budget_the_rate_reaches_zero_by_the_deadline(monkeypatch):
    clock = itertools.count(0.0, 1.5)  # every reading of the clock: 1.5 s later
    monkeypatch.setattr(time, "perf_counter", lambda: next(clock))
    trainer = make_trainer(steps=1000, cooldown=0.5, time_budget=1.0, warmup=3)
    history = trainer.fit()
    assert trainer.budget_spent and 10 < trainer.step < 100
    d = trainer.model.config.d_model
    scales = [lr / noam_lr(k, d, 3) for k, lr in zip(history["step"], history["lr"])]
    assert scales[0] == pytest.approx(1.0) and scales[len(scales) // 3] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(scales, scales[1:]))  # never back up
    assert 0.0 <= scales[-1] < 0.15


@pytest.mark.parametrize("value,error", [(1.5, ValueError), (-0.1, ValueError), (True, TypeError)])
def test_a_bad_cooldown_is_named(value, error):
    with pytest.raises(error, match="cooldown"):
        TrainSettings(cooldown=value)
