"""Notebook 08's checkers: right answers pass, the classic mistakes are named, the library's
own decoder is refused, and an answer that raises late or returns integers gets "not yet"."""

import torch

from transformer_lib.exercises import ex08_inference as ex08
from transformer_lib.masks import padding_mask
from transformer_lib.search import greedy_decode


def failed_with(feedback, *words):
    text = str(feedback)
    return (not feedback.passed) and "not yet" in text and all(w in text for w in words)


def greedy(model, src, max_len, bos_id, eos_id, evaluate=True, mask=True, whole=False, cache=True):
    if evaluate:
        model.eval()
    pad = model.config.pad_id
    with torch.set_grad_enabled(not evaluate):
        src_mask = padding_mask(src, pad) if mask else None
        memory = model.encode(src, padding_mask(src, pad))
        kv = model.new_cache() if cache else None
        ys = torch.full((src.shape[0], 1), bos_id)
        done = torch.zeros(src.shape[0], dtype=torch.bool)
        for _ in range(max_len):
            new = ys if whole or not cache else ys[:, -1:]
            logits = model.decode(new, memory, src_mask, cache=kv)[:, -1]
            logits[:, pad] = float("-inf")
            token = logits.argmax(-1).masked_fill(done, pad)
            ys = torch.cat((ys, token[:, None]), dim=1)
            done |= token == eos_id
            if done.all():
                break
    return ys[:, 1:]


def test_greedy_checker_names_the_cache_and_mask_mistakes():
    assert ex08.check_greedy(greedy)
    assert failed_with(ex08.check_greedy(lambda *a: greedy(*a, whole=True)), "whole prefix")
    assert failed_with(ex08.check_greedy(lambda *a: greedy(*a, mask=False)), "padding mask")
    assert failed_with(ex08.check_greedy(lambda *a: greedy(*a, cache=False)), "without a cache")
    assert failed_with(ex08.check_greedy(lambda *a: greedy(*a, evaluate=False)), "eval()")
    assert failed_with(
        ex08.check_greedy(lambda m, s, n, b, e: greedy_decode(m, s, n, b, e)), "greedy_decode"
    )
    calls = []

    def second_call_raises(*args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyError("cache")
        return greedy(*args)

    assert failed_with(ex08.check_greedy(second_call_raises), "KeyError", "second")
    assert failed_with(ex08.check_greedy(lambda *a: greedy(*a).float()), "torch.long")


def beam_step(scores, log_probs, k):
    B, K, V = log_probs.shape
    best, index = (scores[..., None] + log_probs).view(B, K * V).topk(k, dim=1)
    return best, index // V, index % V


def test_beam_step_checker():
    assert ex08.check_beam_step(beam_step)

    def per_beam(scores, log_probs, k):
        best, token = (scores[..., None] + log_probs).max(-1)
        best, parent = best.sort(-1, descending=True)
        return best, parent, token.gather(1, parent)

    assert failed_with(ex08.check_beam_step(per_beam), "flatten")
    no_score = lambda s, lp, k: beam_step(torch.zeros_like(s), lp, k)
    assert failed_with(ex08.check_beam_step(no_score), "parent's score")
    as_int = lambda s, lp, k: tuple(t.long() for t in beam_step(s, lp, k))
    assert failed_with(ex08.check_beam_step(as_int), "floating-point")  # no "Long vs Float"
    fraction = lambda s, lp, k: (lambda b, p, t: (b, p + t / lp.shape[-1], t))(*beam_step(s, lp, k))
    assert failed_with(ex08.check_beam_step(fraction), "//")


def test_coverage_penalty_checker():
    def cp(attn, src_mask, beta, clip=True, over=1, mask=True):
        received = attn.sum(dim=over)
        received = received.clamp(max=1.0) if clip else received
        logs = received.log().masked_fill(~src_mask, 0.0) if mask else received.log()
        return beta * logs.sum(dim=-1)

    assert ex08.check_coverage_penalty(cp)
    assert ex08.check_coverage_penalty(lambda a, m, b: cp(a.float(), m, b))  # float32 is fine
    assert failed_with(ex08.check_coverage_penalty(lambda *a: cp(*a, over=2, mask=False)), "dim 1")
    assert failed_with(ex08.check_coverage_penalty(lambda *a: cp(*a, mask=False)), "src_mask")
    assert failed_with(ex08.check_coverage_penalty(lambda *a: cp(*a, clip=False)), "min(., 1)")


def test_top_k_sample_checker():
    def sample(logits, k, temperature, generator, scale=None, top=True, draw=True):
        scaled = logits / temperature if scale is None else logits * scale
        if top:
            kth = scaled.topk(k, dim=-1).values[:, -1:]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        if not draw:
            return scaled.argmax(-1)
        return torch.multinomial(scaled.softmax(-1), 1, generator=generator)[:, 0]

    assert ex08.check_top_k_sample(sample)
    assert failed_with(
        ex08.check_top_k_sample(lambda x, k, t, g: sample(x, k, t, g, scale=t)), "divide"
    )
    assert failed_with(ex08.check_top_k_sample(lambda *a: sample(*a, top=False)), "top k")
    assert failed_with(ex08.check_top_k_sample(lambda *a: sample(*a, draw=False)), "argmax")
    global_rng = lambda x, k, t, g: sample(x, k, t, None)
    assert failed_with(ex08.check_top_k_sample(global_rng), "generator")
    out_of_range = lambda x, k, t, g: sample(x, k, t, g) + (100 if k == 1 else 0)  # noqa: E731
    assert failed_with(ex08.check_top_k_sample(out_of_range), "most probable token")
