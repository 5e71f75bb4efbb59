"""Notebook 07's checkers: a right answer passes; the typical wrong ones are refused with a
message that names the mistake; the library's own function is refused where the exercise
says to write it without."""

import random

import torch
import torch.nn.functional as F

from transformer_lib.batching import make_batch, token_batches
from transformer_lib.exercises import ex07_training as ex07
from transformer_lib.training import LabelSmoothingLoss, noam_lr


def smoothed(logits, target, epsilon, pad_id, leave_out_padding=True):
    V = logits.shape[-1]
    q = F.one_hot(target, V).float() * (1 - epsilon) + epsilon / (V - 1)
    q[..., pad_id] = 0.0
    per_position = -(q * logits.log_softmax(-1)).sum(-1)
    return per_position[target != pad_id].mean() if leave_out_padding else per_position.mean()


def test_label_smoothing_checker():
    assert ex07.check_label_smoothing(smoothed)
    assert ex07.check_label_smoothing(lambda *a: smoothed(*a).double().item())
    fb = ex07.check_label_smoothing(lambda *a: smoothed(*a, leave_out_padding=False))
    assert not fb and "padding positions are counted" in str(fb)
    fb = ex07.check_label_smoothing(
        lambda x, y, e, p: F.cross_entropy(
            x.flatten(0, 1), y.flatten(), ignore_index=p, label_smoothing=e
        )
    )
    assert not fb and "all V classes" in str(fb)
    fb = ex07.check_label_smoothing(lambda x, y, e, p: LabelSmoothingLoss(e, p)(x, y))
    assert not fb and "your code calls the library's `LabelSmoothingLoss`" in str(fb)


def test_peak_lr_checker():
    assert ex07.check_peak_lr(lambda s, p, w: p * min(s / w, (w / s) ** 0.5))
    fb = ex07.check_peak_lr(lambda s, p, w: p * max(s / w, (w / s) ** 0.5))
    assert not fb and "max instead of min" in str(fb)
    fb = ex07.check_peak_lr(lambda s, p, w: p * min(1.0, (w / s) ** 0.5))
    assert not fb and "no warm-up" in str(fb)
    fb = ex07.check_peak_lr(lambda s, p, w: p * min((s + 1) / w, (w / (s + 1)) ** 0.5))
    assert not fb and "off by one" in str(fb)
    fb = ex07.check_peak_lr(lambda s, p, w: noam_lr(s, 1, w) * p * w**0.5)
    assert not fb and "without the library's `noam_lr`" in str(fb)


def batcher(cap=True, sort=True, shuffle=True):
    """A batcher right but for the step switched off."""

    def batches(examples, max_tokens, max_sentences, seed):
        rng = random.Random(seed)
        width = [max(len(s), len(t) + 1) for s, t in examples]
        order = list(range(len(examples)))
        rng.shuffle(order)
        if sort:
            order.sort(key=width.__getitem__)
        groups = [[]]
        for i in order:
            g = groups[-1]
            wide = max([width[i]] + [width[j] for j in g])
            if g and ((cap and len(g) == max_sentences) or (len(g) + 1) * wide > max_tokens):
                groups.append([])
            groups[-1].append(i)
        if shuffle:
            rng.shuffle(groups)
        out = []
        for g in groups:
            out.append(make_batch([examples[i] for i in g]))
            out[-1].indices = g
        return out

    return batches


def test_capped_batches_checker():
    assert ex07.check_capped_batches(batcher())
    fb = ex07.check_capped_batches(batcher(cap=False))
    assert not fb and "the cap is max_sentences" in str(fb)
    fb = ex07.check_capped_batches(batcher(sort=False))
    assert not fb and "sort the examples by length" in str(fb)
    fb = ex07.check_capped_batches(batcher(shuffle=False))
    assert not fb and "shortest first" in str(fb)
    fb = ex07.check_capped_batches(lambda e, t, s, seed: batcher()(e, t, s, 0))
    assert not fb and "order must depend on the seed" in str(fb)
    fb = ex07.check_capped_batches(lambda e, t, s, seed: [b for b in batcher()(e, t, s, seed)][1:])
    assert not fb and "exactly one batch" in str(fb)
    fb = ex07.check_capped_batches(lambda e, t, s, seed: token_batches(e, t, True, seed))
    assert not fb and "without the library's `token_batches`" in str(fb)


def test_checkers_leave_the_random_state_alone():
    state = torch.random.get_rng_state()
    ex07.check_label_smoothing(smoothed)
    ex07.check_capped_batches(batcher())
    assert torch.equal(state, torch.random.get_rng_state())
