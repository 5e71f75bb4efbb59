import torch

from transformer_lib import ResidualNorm


def sublayer(x):
    return 3.0 * x + 1.0


def test_post_norm_is_the_papers_formula():
    block = ResidualNorm(6, dropout=0.0)
    x = torch.randn(2, 4, 6)
    torch.testing.assert_close(block(x, sublayer), block.norm(x + sublayer(x)))


def test_pre_norm_normalises_the_sublayer_input_only():
    block = ResidualNorm(6, dropout=0.0, norm_first=True)
    x = torch.randn(2, 4, 6)
    torch.testing.assert_close(block(x, sublayer), x + sublayer(block.norm(x)))


def test_dropout_on_the_sublayer_branch_only():
    block = ResidualNorm(6, dropout=0.999, norm_first=True).train()
    x = torch.randn(2, 4, 6)
    # with (almost) everything dropped, pre-norm leaves the residual path x intact
    torch.testing.assert_close(block(x, sublayer), x)
