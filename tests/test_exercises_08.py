"""Exercise checkers of notebook 08: correct answers pass, classic mistakes get the right
diagnosis, unfinished stubs get feedback instead of an exception."""

import torch

from transformer_lib.exercises import ex08_inference as ex08


def failed_with(feedback, *words):
    text = str(feedback)
    return (not feedback.passed) and all(w in text for w in words)


def stub(*args, **kwargs):
    raise NotImplementedError


def greedy(model, src, max_len, bos_id, eos_id, evaluate=True, ban_pad=True, stop=True):
    if evaluate:
        model.eval()
    with torch.set_grad_enabled(not evaluate):
        memory = model.encode(src)
        ys = torch.full((src.shape[0], 1), bos_id)
        done = torch.zeros(src.shape[0], dtype=torch.bool)
        for _ in range(max_len):
            logits = model.decode(ys, memory, src=src)[:, -1]
            if ban_pad:
                logits[:, model.config.pad_id] = float("-inf")
            token = logits.argmax(-1)
            if stop:
                token = token.masked_fill(done, model.config.pad_id)
            ys = torch.cat([ys, token[:, None]], dim=1)
            done |= token == eos_id
            if stop and done.all():
                break
    return ys[:, 1:]


def test_greedy_checker():
    assert ex08.check_greedy(greedy)
    assert failed_with(ex08.check_greedy(stub), "not implemented")
    assert failed_with(ex08.check_greedy(lambda *a: greedy(*a, evaluate=False)), "eval()")
    assert failed_with(ex08.check_greedy(lambda *a: greedy(*a, ban_pad=False)), "-inf")
    assert failed_with(ex08.check_greedy(lambda *a: greedy(*a, stop=False)), "after its EOS")
    with_bos = lambda m, s, n, b, e: torch.cat(
        (torch.full((s.shape[0], 1), b), greedy(m, s, n, b, e)), dim=1
    )
    assert failed_with(ex08.check_greedy(with_bos), "starts with BOS")


def beam_step(scores, log_probs, k):
    B, K, V = log_probs.shape
    best, index = (scores[..., None] + log_probs).view(B, K * V).topk(k, dim=1)
    return best, index // V, index % V


def test_beam_step_checker():
    assert ex08.check_beam_step(beam_step)
    assert failed_with(ex08.check_beam_step(stub), "not implemented")

    def per_beam(scores, log_probs, k):
        best, token = (scores[..., None] + log_probs).max(-1)
        best, parent = best.sort(-1, descending=True)
        return best, parent, token.gather(1, parent)

    assert failed_with(ex08.check_beam_step(per_beam), "flatten")
    no_score = lambda s, lp, k: beam_step(torch.zeros_like(s), lp, k)
    assert failed_with(ex08.check_beam_step(no_score), "parent's score")
    swapped = lambda s, lp, k: (lambda a, b, c: (a, c, b))(*beam_step(s, lp, k))
    assert failed_with(ex08.check_beam_step(swapped), "mixed up")


def test_gnmt_score_checker():
    assert ex08.check_gnmt_score(lambda lp, n, a: lp / ((5 + n) / 6) ** a)
    assert failed_with(ex08.check_gnmt_score(stub), "not implemented")
    assert failed_with(ex08.check_gnmt_score(lambda lp, n, a: lp / n**a), "length^alpha")
    assert failed_with(
        ex08.check_gnmt_score(lambda lp, n, a: lp * ((5 + n) / 6) ** a), "multiplied"
    )
    assert failed_with(ex08.check_gnmt_score(lambda lp, n, a: lp / (5 + n) ** a), "6^alpha")
