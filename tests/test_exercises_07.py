"""The notebook-06 checkers accept the right answers and diagnose the classic wrong ones."""

import torch
import torch.nn.functional as F

from transformer_lib.exercises.ex07_training import check_label_smoothing, check_noam_lr
from transformer_lib.training.loss import LabelSmoothingLoss
from transformer_lib.training.schedule import noam_lr


def test_schedule_checker():
    assert check_noam_lr(lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-1.5))
    fb = check_noam_lr(noam_lr)
    assert not fb and "not with the library's `noam_lr`" in str(fb)
    fb = check_noam_lr(lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-0.5))
    assert not fb and "warmup_steps^-1.5" in str(fb)
    fb = check_noam_lr(lambda s, d, w: min(s**-0.5, s * w**-1.5))
    assert not fb and "d_model^-0.5" in str(fb)

    def stub(s, d, w):
        raise NotImplementedError

    assert "not implemented" in str(check_noam_lr(stub))


def own_label_smoothing(logits, target, epsilon, pad_id):
    V = logits.shape[-1]
    log_p = logits.log_softmax(-1)  # (B, T, V)
    q = torch.full_like(log_p, epsilon / (V - 1))
    q.scatter_(-1, target.unsqueeze(-1), 1 - epsilon + epsilon / (V - 1))
    q[..., pad_id] = 0.0
    return -(q * log_p).sum(-1)[target != pad_id].mean()


def test_label_smoothing_checker():
    assert check_label_smoothing(own_label_smoothing)
    fb = check_label_smoothing(lambda x, y, e, p: LabelSmoothingLoss(e, p)(x, y))
    assert not fb and "your code calls the library's `LabelSmoothingLoss`" in str(fb)
    fb = check_label_smoothing(lambda x, y, e, p: LabelSmoothingLoss(e, None)(x, y))
    assert not fb and "padding positions are counted" in str(fb)
    fb = check_label_smoothing(
        lambda x, y, e, p: F.cross_entropy(
            x.flatten(0, 1), y.flatten(), ignore_index=p, label_smoothing=e
        )
    )
    assert not fb and "V - 1" in str(fb)
    assert not check_label_smoothing(lambda x, y, e, p: torch.tensor([1.0, 2.0]))
