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


def test_the_sublayer_module_gets_the_further_arguments():
    block = ResidualNorm(6, dropout=0.0)
    x, scale = torch.randn(2, 4, 6), torch.randn(6)
    torch.testing.assert_close(block(x, torch.mul, scale), block.norm(x + x * scale))
    torch.testing.assert_close(block(x, torch.mul, other=scale), block.norm(x + x * scale))


def test_an_attention_sublayer_gives_its_weights_beside_the_output():
    from transformer_lib import MultiHeadAttention

    torch.manual_seed(0)
    block, attn = ResidualNorm(8, dropout=0.0, norm_first=True), MultiHeadAttention(8, 2).eval()
    x = torch.randn(2, 3, 8)
    out, weights = block(x, attn, need_weights=True)
    expected, expected_weights = attn(block.norm(x), need_weights=True)
    torch.testing.assert_close(out, x + expected)
    torch.testing.assert_close(weights, expected_weights)
    assert block(x, attn)[1] is None  # weights not asked for


def test_bad_arguments_are_named():
    import pytest

    with pytest.raises(TypeError, match="norm_first must be True or False, got 'no'"):
        ResidualNorm(6, norm_first="no")
    with pytest.raises(ValueError, match=r"dropout must be in \[0.0, 1.0\), got 1.0"):
        ResidualNorm(6, dropout=1.0)
    with pytest.raises(ValueError, match=r"eps must be in \(0.0, inf\], got 0.0"):
        ResidualNorm(6, eps=0.0)
