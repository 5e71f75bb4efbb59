"""Exercise checkers of notebook 04 (exercises 1 and 2: heads split and merged, PyTorch's module
run with our weights): correct answers pass, classic mistakes get the right diagnosis. Exercise 3
(the whole module) is tested in test_exercises_assembly_04_05."""

import torch
from torch import nn

from transformer_lib.exercises import ex04_multi_head as ex04
from transformer_lib.masks import to_blocked


def failed_with(feedback, *words):
    text = str(feedback)
    return (not feedback.passed) and all(w in text for w in words)


def split_ok(x, h):
    B, L, D = x.shape
    return x.view(B, L, h, D // h).transpose(1, 2)


def merge_ok(x):
    B, H, L, d_k = x.shape
    return x.transpose(1, 2).reshape(B, L, H * d_k)


def test_split_merge():
    assert ex04.check_split_merge(split_ok, merge_ok)
    no_transpose = lambda x, h: x.view(x.shape[0], h, x.shape[1], -1)  # noqa: E731
    assert failed_with(ex04.check_split_merge(no_transpose, merge_ok), "without transpose")
    forgot = lambda x, h: x.view(*x.shape[:2], h, -1)  # noqa: E731
    assert failed_with(ex04.check_split_merge(forgot, merge_ok), "forgot .transpose(1, 2)")
    merge_bad = lambda x: x.reshape(x.shape[0], x.shape[2], -1)  # noqa: E731
    assert failed_with(ex04.check_split_merge(split_ok, merge_bad), "without transposing back")
    merge_view = lambda x: x.transpose(1, 2).view(x.shape[0], x.shape[2], -1)  # noqa: E731
    assert failed_with(ex04.check_split_merge(split_ok, merge_view), "not contiguous")


def make_torch_run(batch_first=True, convert_mask=True, library=False):
    def run(ours, x, mask):
        if library:
            ref = ours.to_torch(batch_first=batch_first)
        else:
            ref = nn.MultiheadAttention(ours.d_model, ours.h, batch_first=batch_first).eval()
            with torch.no_grad():
                ref.in_proj_weight.copy_(ours.in_proj.weight)
                ref.in_proj_bias.copy_(ours.in_proj.bias)
                ref.out_proj.weight.copy_(ours.out_proj.weight)
                ref.out_proj.bias.copy_(ours.out_proj.bias)
        m = to_blocked(mask) if convert_mask else mask
        return ref(x, x, x, attn_mask=m, need_weights=False)[0]

    return run


def test_torch_mha():
    assert ex04.check_torch_mha(make_torch_run())
    assert failed_with(
        ex04.check_torch_mha(make_torch_run(library=True)),
        "your code calls the library's `MultiHeadAttention`",
    )
    assert failed_with(ex04.check_torch_mha(make_torch_run(batch_first=False)), "batch_first trap")
    # with batch size == length the wrong layout runs silently; still diagnosed
    assert failed_with(
        ex04.check_torch_mha(make_torch_run(batch_first=False), batch=5),
        "batch_first trap",
        "across the batch",
    )
    assert failed_with(
        ex04.check_torch_mha(make_torch_run(convert_mask=False)),
        "mask convention inverted",
        "to_blocked",
    )
