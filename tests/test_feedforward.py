import torch

from transformer_lib import PositionwiseFeedForward


def test_is_equation_2_applied_per_position():
    ff = PositionwiseFeedForward(8, 32, dropout=0.0)
    x = torch.randn(2, 5, 8)
    expected = torch.relu(x @ ff.w_1.weight.T + ff.w_1.bias) @ ff.w_2.weight.T + ff.w_2.bias
    torch.testing.assert_close(ff(x), expected)
    # position-wise: each position alone gives the same result
    torch.testing.assert_close(ff(x[:, 2:3]), ff(x)[:, 2:3])


def test_equals_two_1x1_convolutions():
    ff = PositionwiseFeedForward(8, 32, dropout=0.0)
    conv1, conv2 = torch.nn.Conv1d(8, 32, 1), torch.nn.Conv1d(32, 8, 1)
    with torch.no_grad():
        conv1.weight.copy_(ff.w_1.weight[..., None])
        conv1.bias.copy_(ff.w_1.bias)
        conv2.weight.copy_(ff.w_2.weight[..., None])
        conv2.bias.copy_(ff.w_2.bias)
    x = torch.randn(2, 5, 8)
    conv = conv2(torch.relu(conv1(x.transpose(1, 2)))).transpose(1, 2)
    torch.testing.assert_close(ff(x), conv, atol=1e-6, rtol=1e-5)
