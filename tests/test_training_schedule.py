"""The warm-up schedule of §5.3, Eq. 3, and the optimizer's settings."""

import pytest
import torch

from transformer_lib.training.schedule import make_optimizer, noam_lr


def eq3(step, d_model, warmup):
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@pytest.mark.parametrize("d_model,warmup", [(512, 4000), (64, 100), (1024, 10)])
def test_matches_equation_3(d_model, warmup):
    for step in (1, 2, warmup // 2 or 1, warmup, warmup + 1, 10 * warmup):
        assert noam_lr(step, d_model, warmup) == pytest.approx(eq3(step, d_model, warmup))
    assert noam_lr(7, d_model, warmup, factor=2.5) == pytest.approx(2.5 * eq3(7, d_model, warmup))


def test_shape_linear_warmup_peak_then_inverse_sqrt():
    d, w = 512, 4000
    assert noam_lr(2000, d, w) == pytest.approx(2 * noam_lr(1000, d, w))  # linear
    lrs = [noam_lr(s, d, w) for s in range(1, 3 * w)]
    assert max(lrs) == pytest.approx((d * w) ** -0.5)  # peak value
    assert lrs.index(max(lrs)) + 1 == w  # at warm-up's end
    assert noam_lr(4 * w, d, w) == pytest.approx(noam_lr(w, d, w) / 2)  # 1/sqrt decay


def test_bad_step():
    with pytest.raises(ValueError, match="step"):
        noam_lr(0, 512)
    with pytest.raises(ValueError, match="warmup_steps"):
        noam_lr(1, 512, warmup_steps=0)


@pytest.mark.parametrize("step", [True, 2.0, torch.tensor(3)])
def test_step_must_be_an_integer_not_a_bool_float_or_tensor(step):
    with pytest.raises(TypeError, match=r"^step must be an integer, got "):
        noam_lr(step, 512)


def test_optimizer_settings_and_lr_per_update():
    model = torch.nn.Linear(3, 2)
    opt, sched = make_optimizer(model, d_model=64, warmup_steps=10, factor=2.0)
    group = opt.param_groups[0]
    assert group["betas"] == (0.9, 0.98) and group["eps"] == 1e-9
    seen = []
    for _ in range(25):
        seen.append(group["lr"])
        model(torch.randn(4, 3)).sum().backward()
        opt.step()
        opt.zero_grad()
        sched.step()
    assert seen == pytest.approx([noam_lr(k, 64, 10, 2.0) for k in range(1, 26)])


def test_cpu_optimizer_is_fused_and_updates_like_plain_adam():
    torch.manual_seed(0)
    model = torch.nn.Linear(5, 4)
    plain = torch.nn.Linear(5, 4)
    plain.load_state_dict(model.state_dict())
    opt, sched = make_optimizer(model, d_model=64, warmup_steps=10, factor=2.0)
    assert opt.param_groups[0]["fused"] is True
    ref = torch.optim.Adam(plain.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    ref_sched = torch.optim.lr_scheduler.LambdaLR(ref, lambda k: noam_lr(k + 1, 64, 10, 2.0))
    for _ in range(20):
        x = torch.randn(8, 5)
        for m, o, s in ((model, opt, sched), (plain, ref, ref_sched)):
            m(x).square().sum().backward()
            o.step()
            o.zero_grad()
            s.step()
    for a, b in zip(model.parameters(), plain.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
