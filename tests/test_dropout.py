import torch
from torch import nn

from transformer_lib.dropout import Dropout


def test_cpu_dropout_keeps_with_probability_one_minus_p_and_rescales():
    torch.manual_seed(0)
    drop, x = Dropout(0.1), torch.full((1_000_000,), 3.0, requires_grad=True)
    assert isinstance(drop, nn.Dropout)
    y = drop(x)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.9) < 2e-3      # 6 standard deviations: 1.8e-3
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 3.0 / 0.9))
    y.sum().backward()                                       # gradient: the same mask, scaled
    torch.testing.assert_close(x.grad, kept.float() / 0.9)
    assert not torch.equal(drop(x) != 0, kept)               # a fresh mask every call
    drop.eval()
    assert drop(x) is x


def test_cpu_dropout_follows_the_seed_and_matches_the_rate_per_position():
    drop = Dropout(0.5)
    torch.manual_seed(1)
    a = drop(torch.ones(4000, 50))
    torch.manual_seed(1)
    torch.testing.assert_close(drop(torch.ones(4000, 50)), a)
    per_column = (a != 0).float().mean(dim=0)                 # no position is favoured
    assert per_column.min() > 0.45 and per_column.max() < 0.55
