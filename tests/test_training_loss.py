"""Label smoothing (§5.4) against its formula computed by hand, and against PyTorch."""

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_lib.training.loss import LabelSmoothingLoss, smoothed_targets


def test_hand_computed_tiny_example():
    # V = 4 classes, class 0 is padding; two positions: target 2, then padding.
    logits = torch.tensor([[[0.0, 1.0, 2.0, 3.0], [5.0, 0.0, 0.0, 0.0]]])
    target = torch.tensor([[2, 0]])
    eps = 0.1
    z = [0.0, 1.0, 2.0, 3.0]
    log_z = math.log(sum(math.exp(v) for v in z))
    log_p = [v - log_z for v in z]
    # q: 1 - eps on class 2, eps / 3 on classes 1, 2, 3 (padding excluded), 0 on class 0
    q = [0.0, eps / 3, 1 - eps + eps / 3, eps / 3]
    expected = -sum(qk * lp for qk, lp in zip(q, log_p))  # the padded position is ignored
    got = LabelSmoothingLoss(eps, ignore_index=0)(logits, target)
    assert got.item() == pytest.approx(expected, rel=1e-6)
    assert smoothed_targets(target, 4, eps, 0)[0, 0].tolist() == pytest.approx(q)


def test_targets_are_distributions_without_mass_on_padding():
    target = torch.tensor([[3, 1, 0], [2, 0, 0]])
    q = smoothed_targets(target, 7, 0.1, ignore_index=0)  # (2, 3, 7)
    real = target != 0
    torch.testing.assert_close(q.sum(-1)[real], torch.ones(int(real.sum())))
    assert (q[..., 0] == 0).all() and (q[~real] == 0).all()
    assert q[0, 0].max().item() == pytest.approx(0.9 + 0.1 / 6)


def test_equals_sum_of_q_times_log_p():
    torch.manual_seed(0)
    logits, target = torch.randn(3, 5, 11), torch.randint(0, 11, (3, 5))
    target[0, 3:] = 0
    q = smoothed_targets(target, 11, 0.1, ignore_index=0)
    per_token = -(q * logits.log_softmax(-1)).sum(-1)  # (3, 5)
    expected = per_token[target != 0].mean()
    torch.testing.assert_close(LabelSmoothingLoss(0.1, 0)(logits, target), expected)


def test_matches_pytorch_when_definitions_coincide():
    # PyTorch spreads epsilon over all V classes: the same as ignore_index=None here.
    torch.manual_seed(1)
    logits, target = torch.randn(4, 6, 13), torch.randint(0, 13, (4, 6))
    for eps in (0.0, 0.1, 0.3):
        ours = LabelSmoothingLoss(eps, ignore_index=None)(logits, target)
        ref = F.cross_entropy(logits.flatten(0, 1), target.flatten(), label_smoothing=eps)
        torch.testing.assert_close(ours, ref)


def test_epsilon_zero_is_cross_entropy_ignoring_padding():
    torch.manual_seed(2)
    logits, target = torch.randn(2, 7, 9), torch.randint(1, 9, (2, 7))
    target[1, 4:] = 0
    ref = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0)
    torch.testing.assert_close(LabelSmoothingLoss(0.0, 0)(logits, target), ref)


def test_padding_positions_change_nothing():
    torch.manual_seed(3)
    logits, target = torch.randn(1, 6, 8), torch.randint(1, 8, (1, 6))
    target[0, 4:] = 0
    loss = LabelSmoothingLoss()
    before = loss(logits, target)
    logits[0, 4:] = 100 * torch.randn(2, 8)
    torch.testing.assert_close(loss(logits, target), before)


def test_minimum_is_entropy_of_q():
    V, eps = 6, 0.1
    target = torch.tensor([[4]])
    q = smoothed_targets(target, V, eps, 0)
    logits = torch.where(q > 0, q.log(), torch.tensor(-1e4))  # predict q exactly
    entropy = -(q[q > 0] * q[q > 0].log()).sum()
    torch.testing.assert_close(LabelSmoothingLoss(eps, 0)(logits, target), entropy)


def test_bad_arguments():
    with pytest.raises(ValueError, match="epsilon"):
        LabelSmoothingLoss(1.0)
    with pytest.raises(ValueError, match="disagree"):
        LabelSmoothingLoss()(torch.randn(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))
