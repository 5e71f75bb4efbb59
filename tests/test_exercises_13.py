"""Notebook 13's exercise checkers: a right answer passes, each typical mistake gets "not yet"
with the mistake named, and the library's own pieces are refused."""

import torch

from transformer_lib.exercises import ex13_since_2017 as ex13
from transformer_lib.lm import rope


def not_yet(feedback, *words):
    text = str(feedback)
    assert not feedback and "not yet" in text, text
    for word in words:
        assert word in text, text


RIGHT_ROPE = ex13.CHECKS["rope"][1]()
RIGHT_GQA = ex13.CHECKS["gqa"][1]()


def test_the_right_rope_is_the_librarys():
    x = torch.randn(2, 3, 6, 8, dtype=torch.float64)
    torch.testing.assert_close(RIGHT_ROPE(x, 4), rope(x, 4))


def test_rope_passes_and_names_each_mistake():
    assert ex13.check_rope(RIGHT_ROPE)
    angles = ex13._angles
    backwards = lambda x, s: ex13._turn(x, -angles(x.shape[-1], s, x.shape[-2]))
    from_zero = lambda x, s: ex13._turn(x, angles(x.shape[-1], 0, x.shape[-2]))
    halves = lambda x, s: ex13._halves(x, angles(x.shape[-1], s, x.shape[-2]))
    not_yet(ex13.check_rope(backwards), "wrong way")
    not_yet(ex13.check_rope(from_zero), "start")
    not_yet(ex13.check_rope(halves), "halves layout")
    not_yet(ex13.check_rope(lambda x, s: x), "wrong values")


def test_rope_refuses_the_librarys():
    not_yet(ex13.check_rope(rope), "without the library's `rope`")
    not_yet(ex13.check_rope(lambda x, s: rope(x, s)), "without the library's `rope`")


def test_gqa_passes_and_names_each_mistake():
    assert ex13.check_gqa(RIGHT_GQA)

    def tiled(q, k, v, mask):
        g = q.shape[1] // k.shape[1]
        return torch.nn.functional.scaled_dot_product_attention(
            q, k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1), attn_mask=mask
        )

    not_yet(ex13.check_gqa(tiled), "repeat_interleave")
    not_yet(ex13.check_gqa(lambda q, k, v, mask: RIGHT_GQA(q, k, v)), "mask is ignored")
    not_yet(ex13.check_gqa(lambda q, k, v, mask: q), "wrong values")


def test_gqa_refuses_the_checkers_reference():
    not_yet(ex13.check_gqa(ex13.gqa_reference), "share the heads yourself")


def test_gqa_refuses_pytorchs_own_head_sharing():
    def shared_by_pytorch(q, k, v, mask):
        return torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, enable_gqa=True
        )

    not_yet(ex13.check_gqa(shared_by_pytorch), "`enable_gqa=True`")
