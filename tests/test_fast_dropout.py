import torch
from torch import nn

from transformer_lib.fast import accelerate
from transformer_lib.fast.dropout import (
    FastDropout,
    draw_key,
    keep_mask,
    random_words,
    relu_dropout,
)

from splitmix64 import MASK64, splitmix64, splitmix64_mask


def Dropout(p: float) -> FastDropout:
    """The dropout that accelerate(model, kernels=False) puts in place of nn.Dropout(p)."""
    return accelerate(nn.Dropout(p), kernels=False)


def test_cpu_dropout_keeps_with_probability_one_minus_p_and_rescales():
    torch.manual_seed(0)
    drop, x = Dropout(0.1), torch.full((1_000_000,), 3.0, requires_grad=True)
    assert isinstance(drop, nn.Dropout)
    y = drop(x)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.9) < 2e-3  # 6 standard deviations: 1.8e-3
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 3.0 / 0.9))
    y.sum().backward()  # gradient: the same mask, scaled
    torch.testing.assert_close(x.grad, kept.float() / 0.9)
    assert not torch.equal(drop(x) != 0, kept)  # a fresh mask every call
    drop.eval()
    assert drop(x) is x


def test_cpu_dropout_follows_the_seed_and_matches_the_rate_per_position():
    drop = Dropout(0.5)
    torch.manual_seed(1)
    a = drop(torch.ones(4000, 50))
    torch.manual_seed(1)
    torch.testing.assert_close(drop(torch.ones(4000, 50)), a)
    per_column = (a != 0).float().mean(dim=0)  # no position is favoured
    assert per_column.min() > 0.45 and per_column.max() < 0.55


def test_keep_mask_rounds_p_to_a_multiple_of_2_to_the_minus_16_and_keeps_the_dtype():
    torch.manual_seed(0)
    for p in (0.1, 0.5, 1 / 2**16):
        m = keep_mask(torch.Size((400, 2500)), p)
        rate = round(p * 2**16) / 2**16  # what is really used
        torch.testing.assert_close(m.unique(), torch.tensor([0.0, 1.0 / (1.0 - p)]))
        sd = (rate * (1 - rate) / m.numel()) ** 0.5
        assert abs((m == 0).float().mean().item() - rate) < 6 * sd + 1e-7
    assert keep_mask(torch.Size((3, 5)), 0.1, torch.bfloat16).dtype == torch.bfloat16
    assert keep_mask(torch.Size((7,)), 0.1).shape == (7,)  # numel not a multiple of 4


def test_dropout_keeps_a_bf16_input_in_bf16():
    x = torch.ones(64, 64, dtype=torch.bfloat16)
    assert Dropout(0.1).train()(x).dtype == torch.bfloat16


def test_relu_dropout_equals_dropout_of_relu_with_the_same_mask_and_gradient():
    drop = Dropout(0.3)
    x = torch.randn(50, 40, requires_grad=True)
    torch.manual_seed(3)
    fast = relu_dropout(x, 0.3, kernels=False)
    x2 = x.detach().clone().requires_grad_()
    torch.manual_seed(3)
    slow = drop(torch.relu(x2))
    torch.testing.assert_close(fast, slow, rtol=0, atol=0)
    g = torch.randn_like(fast)
    fast.backward(g)
    slow.backward(g)
    torch.testing.assert_close(x.grad, x2.grad, rtol=0, atol=0)
    x_before = x.detach().clone()
    relu_dropout(x, 0.3, kernels=False)
    assert torch.equal(x, x_before)  # the input is never changed


def test_relu_dropout_keeps_only_its_output_for_the_backward_pass():
    x = torch.randn(64, 32, requires_grad=True)
    y = relu_dropout(x, 0.2, kernels=False)
    saved = y.grad_fn.saved_tensors
    assert len(saved) == 1 and saved[0].data_ptr() == y.data_ptr()  # no mask kept


def test_keep_mask_is_the_documented_splitmix64_mask():
    for key in (0, 12345, -1, -(2**63)):
        words = random_words(key, 6)
        assert [w & MASK64 for w in words.tolist()] == [
            splitmix64(key & MASK64, w) for w in range(6)
        ]
        for n, p in ((1001, 0.3), (24, 0.5)):  # 1001: a last word half used
            assert torch.equal(
                keep_mask(torch.Size((n,)), p, key=key) != 0, splitmix64_mask(key, n, p)
            )


def test_keep_mask_draws_its_key_from_the_seeded_generator():
    torch.manual_seed(7)
    key = draw_key()
    torch.manual_seed(7)
    assert torch.equal(
        keep_mask(torch.Size((5, 40)), 0.2), keep_mask(torch.Size((5, 40)), 0.2, key=key)
    )
    assert not torch.equal(
        keep_mask(torch.Size((5, 40)), 0.2, key=key),
        keep_mask(torch.Size((5, 40)), 0.2, key=key + 1),
    )


def test_keep_mask_is_the_same_with_one_thread_or_two():
    threads = torch.get_num_threads()
    try:
        masks = []
        for n in (1, 2):
            torch.set_num_threads(n)
            masks.append(keep_mask(torch.Size((64, 48, 256)), 0.1, key=3))
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(masks[0], masks[1])
