"""Checkers for notebook 08 (inference): greedy decoding with a key/value cache, one step of
beam search, the coverage penalty of Wu et al. (2016), top-k sampling with a temperature."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

import torch

from ..config import TransformerConfig
from ..decoder import KVCache
from ..masks import padding_mask
from ..model import Transformer
from ..search import Beam, beam_search, greedy_decode, next_log_probs
from . import Feedback, check_tensor, first_match, keeps_rng, run_learner_code
from .own_work import guard, refuses

Tensor = torch.Tensor
PAD, BOS, EOS = 0, 1, 2


def _as_float(got) -> Optional[Tensor]:
    """A floating-point copy of a tensor (float64), or None if it is not a real tensor."""
    if not isinstance(got, Tensor) or got.is_complex():
        return None
    return got.detach().to(torch.float64)


def _same_ids(got, expected: Tensor) -> bool:
    """Whether ``got`` holds the ids of ``expected`` (any integer or float dtype)."""
    value = _as_float(got)
    return (
        value is not None
        and value.shape == expected.shape
        and torch.equal(value, expected.to(torch.float64))
    )


# Exercise 1: greedy decoding with a cache ---------------------------------------------------
def _toy_model_and_source() -> Tuple[Transformer, Tensor]:
    """A random untied model with dropout, in training mode, and a batch whose rows stop at
    different steps; rows 1 and 5 are padded (without the source mask they decode otherwise)."""
    torch.manual_seed(4)
    config = TransformerConfig.tiny(src_vocab_size=20, tgt_vocab_size=12, P_drop=0.3)
    model = Transformer(config).train()
    src = torch.randint(3, 20, (6, 7), generator=torch.Generator().manual_seed(4))
    src[1, 4:], src[5, 1:] = PAD, PAD  # (6, 7), padded
    return model, src


def _greedy_without_source_mask(model: Transformer, src: Tensor, max_len: int) -> Tensor:
    """The decoder never told where the source is padded (the cross-attention sees padding)."""
    pad = model.config.pad_id
    with torch.no_grad():
        memory = model.encode(src)  # (B, S, D)
        ys = torch.full((src.shape[0], 1), BOS)  # (B, 1)
        done = torch.zeros(src.shape[0], dtype=torch.bool)
        for _ in range(max_len):
            logits = model.decode(ys, memory)[:, -1]  # (B, V)
            logits[:, pad] = float("-inf")
            token = logits.argmax(-1).masked_fill(done, pad)  # (B,)
            ys = torch.cat((ys, token[:, None]), dim=1)
            done |= token == EOS
            if bool(done.all()):
                break
    return ys[:, 1:]


def _greedy_mistake(got: Tensor, expected: Tensor) -> Optional[str]:
    """Name the classic greedy-decoding mistake that ``got`` shows, if any."""
    if got.shape[1] == expected.shape[1] + 1 and (got[:, 0] == BOS).all():
        return "the output starts with BOS: return only the tokens after it"
    for row in got:
        hit = (row == EOS).nonzero()
        end = int(hit[0]) if hit.numel() else len(row)
        if (row[:end] == PAD).any():
            return (
                "a row produced the padding token before its end: padding is never a "
                "real output, so set its logit to -inf before taking the argmax"
            )
        if hit.numel() and (row[end + 1 :] != PAD).any():
            return (
                "a row goes on after its EOS: once a row has produced EOS, fill the "
                "rest with padding (keep a `done` flag per row)"
            )
    if got.shape[1] > expected.shape[1]:
        return (
            "decoding goes on after every row has finished: stop as soon as all rows "
            "have produced EOS"
        )
    return None


class _DecodeCalls:
    """Records what each ``model.decode`` call was fed: (new positions, cache or None)."""

    def __init__(self, model: Transformer) -> None:
        self.model, self.calls = model, []  # type: Transformer, List[Tuple[int, object]]
        self.method = model.decode

    def __enter__(self) -> "_DecodeCalls":
        def decode(tgt, memory, *args, **kwargs):
            cache = kwargs.get("cache", args[2] if len(args) > 2 else None)
            width = tgt.shape[1] if isinstance(tgt, Tensor) and tgt.dim() == 2 else -1
            self.calls.append((width, cache))
            return self.method(tgt, memory, *args, **kwargs)

        self.model.decode = decode  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc) -> None:
        del self.model.decode


def _cache_use(calls: List[Tuple[int, object]]) -> Optional[str]:
    """What is wrong with how the decoder was called, for a cached greedy decoder."""
    if not calls:
        return "your function never calls model.decode"
    if any(not isinstance(cache, KVCache) for _, cache in calls):
        return (
            "model.decode was called without a cache: create one with model.new_cache() "
            "and pass it as cache=... at every step"
        )
    if any(width != 1 for width, _ in calls):
        return (
            "you feed the whole prefix AND use the cache: with a cache, feed only the newest "
            "token, ys[:, -1:] (the cache already holds the earlier positions)"
        )
    return None


@refuses(
    greedy_decode,
    beam_search,
    next_log_probs,
    rule="to write the loop yourself, without the library's `greedy_decode`",
)
@keeps_rng
def check_greedy(fn: Callable) -> Feedback:
    """``fn(model, src, max_len, bos_id, eos_id)`` -> (B, <= max_len) ids after BOS, EOS
    included, padding after it, decoded with a key/value cache; the model is handed over in
    training mode."""
    fb = Feedback("Exercise 1 (greedy decoding with a key/value cache)")
    model, src = _toy_model_and_source()
    expected = greedy_decode(model, src, 10, BOS, EOS)  # (6, <= 10)
    model.train()
    with _DecodeCalls(model) as watch:
        got = run_learner_code(fb, fn, model, src, 10, BOS, EOS)
    if got is None:
        return fb
    if not isinstance(got, Tensor) or got.dim() != 2 or got.shape[0] != src.shape[0]:
        fb.fail(
            f"return a (B, length) tensor of ids with B = {src.shape[0]}, got "
            f"{getattr(got, 'shape', type(got).__name__)}"
        )
        return fb
    if got.is_floating_point() or got.is_complex() or got.dtype == torch.bool:
        fb.fail(f"return integer token ids (torch.long), got dtype {got.dtype}")
        return fb
    got = got.long()
    model.train()
    again = run_learner_code(fb, fn, model, src, 10, BOS, EOS)
    if again is None:
        fb.fail("the first call worked, the second did not (see the error above)")
        return fb
    if not _same_ids(again, got):
        fb.fail(
            "two calls gave different outputs: dropout is on. Call model.eval() first "
            "(and decode under torch.no_grad())"
        )
        return fb
    misuse = _cache_use(watch.calls)
    if got.shape == expected.shape and torch.equal(got, expected):
        if misuse:
            fb.fail(f"the tokens are right, but {misuse}")
            return fb
        fb.ok(
            f"the same {tuple(expected.shape)} tokens as the library's greedy_decode, EOS "
            "then padding where rows stop, one new token fed per step with the cache"
        )
        return fb
    fb.fail(
        f"the tokens differ from greedy_decode's (got shape {tuple(got.shape)}, "
        f"expected {tuple(expected.shape)})"
    )
    if misuse:
        fb.fail(f"looks like: {misuse}")
        return fb
    unmasked = _greedy_without_source_mask(model.eval(), src, 10)
    if got.shape == unmasked.shape and torch.equal(got, unmasked):
        fb.fail(
            "looks like: the decoder does not get the source padding mask, so "
            "cross-attention looks at the padding of the shorter sources: pass "
            "src_mask = padding_mask(src, pad_id) to model.decode"
        )
        return fb
    mistake = _greedy_mistake(got, expected)
    if mistake:
        fb.fail(f"looks like: {mistake}")
    return fb


def right_greedy() -> Callable:
    def cached_greedy(model, src, max_len, bos_id, eos_id):
        model.eval()
        pad = model.config.pad_id
        with torch.no_grad():
            src_mask = padding_mask(src, pad)  # (B, 1, 1, S)
            memory = model.encode(src, src_mask)  # (B, S, D)
            cache = model.new_cache()
            ys = torch.full((src.shape[0], 1), bos_id)  # (B, 1)
            done = torch.zeros(src.shape[0], dtype=torch.bool)  # (B,)
            for _ in range(max_len):
                logits = model.decode(ys[:, -1:], memory, src_mask, cache=cache)[:, -1]
                logits[:, pad] = float("-inf")
                token = logits.argmax(-1).masked_fill(done, pad)  # (B,)
                ys = torch.cat((ys, token[:, None]), dim=1)  # (B, t + 1)
                done |= token == eos_id
                if done.all():
                    break
        return ys[:, 1:]

    return cached_greedy


# Exercise 2: one step of beam search --------------------------------------------------------
def _step_reference(scores: Tensor, log_probs: Tensor, k: int) -> Tuple[Tensor, Tensor, Tensor]:
    B, K, V = log_probs.shape
    total = scores[..., None] + log_probs  # (B, K, V)
    best, index = total.view(B, K * V).topk(k, dim=1)  # (B, k)
    return best, index // V, index % V


@refuses(Beam, rule="to write the step yourself, without the library's `Beam`")
@keeps_rng
def check_beam_step(fn: Callable) -> Feedback:
    """``fn(scores (B, K), log_probs (B, K, V), k)`` -> (new_scores, parent, token), each
    (B, k), best first: the k best one-token extensions over all K*V candidates per item."""
    fb = Feedback("Exercise 2 (one step of beam search)")
    torch.manual_seed(0)
    B, K, V, k = 2, 3, 5, 3
    scores = -torch.rand(B, K) * 3  # (B, K)
    log_probs = torch.randn(B, K, V).log_softmax(-1)  # (B, K, V)
    got = run_learner_code(fb, fn, scores.clone(), log_probs.clone(), k)
    if got is None:
        return fb
    if not (
        isinstance(got, (tuple, list))
        and len(got) == 3
        and all(isinstance(g, Tensor) and tuple(g.shape) == (B, k) for g in got)
    ):
        fb.fail(f"return three ({B}, {k}) tensors: (new_scores, parent, token)")
        return fb
    new_scores, parent, token = (_as_float(g) for g in got)
    if new_scores is None or parent is None or token is None:
        fb.fail("return real-valued tensors (scores) and integer tensors (parent, token)")
        return fb
    if not got[0].is_floating_point():
        fb.fail(
            f"new_scores has dtype {got[0].dtype}: scores are sums of log-probabilities, "
            "keep them floating-point (no rounding to integers)"
        )
        return fb
    best, want_parent, want_token = (
        t.to(torch.float64) for t in _step_reference(scores, log_probs, k)
    )
    if (
        torch.allclose(new_scores, best, atol=1e-5)
        and torch.equal(parent, want_parent)
        and torch.equal(token, want_token)
    ):
        fb.ok("the k best of the K*V candidates per item, with their parents and tokens")
        return fb
    fb.fail("the selected candidates differ from the k best of score + log-prob")
    per_beam = (scores[..., None] + log_probs).max(-1).values.sort(-1, descending=True).values
    no_score = _step_reference(torch.zeros_like(scores), log_probs, k)[0]
    swapped = torch.equal(parent, want_token) and torch.equal(token, want_parent)
    for message, wrong in (
        (
            "the best token of each beam was kept; compare all K*V candidates of an item "
            "together (flatten to (B, K*V) before topk)",
            torch.allclose(new_scores, per_beam.double(), atol=1e-5),
        ),
        (
            "the parent's score was not added: a hypothesis's score is the sum of all its "
            "log-probs",
            torch.allclose(new_scores, no_score.double(), atol=1e-5),
        ),
        (
            "parent and token are mixed up: with flat index i, parent = i // V, token = i % V",
            swapped,
        ),
        (
            "parent = i / V is a fraction: use integer division, parent = i // V",
            torch.allclose(parent, want_parent + want_token / V),
        ),
    ):
        if wrong:
            fb.fail(f"looks like: {message}")
            break
    return fb


def right_beam_step() -> Callable:
    def beam_step(scores, log_probs, k):
        B, K, V = log_probs.shape
        total = (scores[..., None] + log_probs).reshape(B, K * V)  # (B, K*V)
        new_scores, index = total.topk(k, dim=1)  # (B, k)
        return new_scores, index // V, index % V

    return beam_step


# Exercise 3: the coverage penalty -----------------------------------------------------------
def _coverage(attn: Tensor, src_mask: Tensor, beta: float) -> Tensor:
    """beta * sum over real source positions i of log(min(sum over targets j of p_ij, 1))."""
    received = attn.sum(dim=1).clamp(max=1.0)  # (B, S)
    return beta * received.log().masked_fill(~src_mask, 0.0).sum(dim=-1)  # (B,)


def _coverage_case() -> Tuple[Tensor, Tensor, float]:
    """Cross-attention (B, T, S) of 3 outputs over padded sources: some source positions get
    more than their share, some almost none, the padding none at all."""
    g = torch.Generator().manual_seed(8)
    B, T, S = 3, 4, 7
    src_mask = torch.ones(B, S, dtype=torch.bool)
    src_mask[1, 5:], src_mask[2, 3:] = False, False  # (B, S): True = a real source position
    scores = torch.randn(B, T, S, generator=g, dtype=torch.float64) * 2.0
    attn = scores.masked_fill(~src_mask[:, None, :], float("-inf")).softmax(dim=-1)  # (B, T, S)
    return attn, src_mask, 0.2


def check_coverage_penalty(fn: Callable) -> Feedback:
    """``fn(attn (B, T, S), src_mask (B, S) bool, beta)`` -> (B,) coverage penalties
    cp = beta * sum_i log(min(sum_j attn[:, j, i], 1)) over the real source positions i."""
    fb = Feedback("Exercise 3 (the coverage penalty of Wu et al., 2016)")
    attn, src_mask, beta = _coverage_case()
    got = run_learner_code(fb, fn, attn.clone(), src_mask.clone(), beta)
    if got is None:
        return fb
    expected = _coverage(attn, src_mask, beta)  # (B,)
    if check_tensor(fb, "cp", got, expected, atol=1e-6, rtol=1e-6):
        uniform = torch.full((1, 4, 4), 0.25, dtype=torch.float64)  # every source covered once
        full = run_learner_code(fb, fn, uniform, torch.ones(1, 4, dtype=torch.bool), beta)
        if full is None:
            fb.fail("the first call worked, the second did not (see the error above)")
        elif check_tensor(fb, "cp of a source covered exactly once", full, torch.zeros(1)):
            fb.ok("a source whose every position got a total weight >= 1 costs nothing")
        return fb
    received = attn.sum(dim=1)  # (B, S)
    mistake = first_match(
        got,
        {
            "each source position's weights must be summed over the target positions (dim 1, "
            "T); summed over the source, every query's weights add up to 1 and cp is 0": (
                beta * attn.sum(dim=-1).clamp(max=1.0).log().sum(dim=-1)
            ),
            "the padded source positions are counted: they receive no attention, log(0) = "
            "-inf; leave them out with src_mask": beta * received.clamp(max=1.0).log().sum(-1),
            "no min(., 1): a source position attended more than once earns a bonus": (
                beta * received.log().masked_fill(~src_mask, 0.0).sum(dim=-1)
            ),
            "beta is missing: cp = beta * sum log min(...)": _coverage(attn, src_mask, 1.0),
            "the sign is flipped: log(min(., 1)) <= 0, so cp <= 0 (a penalty)": (
                -_coverage(attn, src_mask, beta)
            ),
        },
    )
    if mistake:
        fb.fail(f"looks like: {mistake}")
    return fb


def right_coverage_penalty() -> Callable:
    def coverage_penalty(attn, src_mask, beta):
        received = attn.sum(dim=1).clamp(max=1.0)  # (B, S): total weight per source position
        return beta * received.log().masked_fill(~src_mask, 0.0).sum(dim=-1)  # (B,)

    return coverage_penalty


# Exercise 4: top-k sampling with a temperature ----------------------------------------------
def _sampling_case() -> Tuple[Tensor, int, float, Dict[str, Tensor]]:
    """Logits of 3 distinct rows, each repeated 2000 times, and the token frequencies of the
    right sampler and of the classic wrong ones, per distinct row: (3, V)."""
    logits = torch.tensor(
        [
            [4.0, 2.0, 1.0, 0.5, 0.0, -1.0],
            [0.0, 3.0, 0.2, 2.0, -1.0, 1.0],
            [1.0, 1.0, 0.9, -2.0, 0.8, 0.7],
        ]
    )  # (3, V)
    k, temperature = 3, 2.0

    def top_k_probs(scaled: Tensor, keep: int) -> Tensor:
        kth = scaled.topk(keep, dim=-1).values[:, -1:]  # (3, 1)
        return scaled.masked_fill(scaled < kth, float("-inf")).softmax(dim=-1)  # (3, V)

    table = {
        "right": top_k_probs(logits / temperature, k),
        "the temperature multiplies the logits; divide them by it (T > 1 flattens the "
        "distribution, T < 1 sharpens it)": top_k_probs(logits * temperature, k),
        "the temperature is ignored: sample from softmax(logits / T)": top_k_probs(logits, k),
        "tokens outside the top k are sampled: set every logit below the k-th largest to -inf "
        "before the softmax": (logits / temperature).softmax(dim=-1),
    }
    return logits.repeat_interleave(2000, dim=0), k, temperature, table  # (6000, V)


@keeps_rng
def check_top_k_sample(fn: Callable) -> Feedback:
    """``fn(logits (B, V), k, temperature, generator)`` -> (B,) token ids, each drawn from
    softmax(logits / temperature) restricted to the k largest logits of its row."""
    fb = Feedback("Exercise 4 (top-k sampling with a temperature)")
    logits, k, temperature, table = _sampling_case()
    B, V = logits.shape
    draws = []
    for seed in (0, 0, 1):
        got = run_learner_code(
            fb, fn, logits.clone(), k, temperature, torch.Generator().manual_seed(seed)
        )
        if got is None:
            if draws:
                fb.fail("the first call worked, a later one did not (see the error above)")
            return fb
        if not isinstance(got, Tensor) or tuple(got.shape) != (B,):
            fb.fail(
                f"return a ({B},) tensor of token ids, one per row, got "
                f"{tuple(got.shape) if isinstance(got, Tensor) else type(got).__name__}"
            )
            return fb
        value = _as_float(got)
        if value is None or not bool(((value >= 0) & (value < V) & (value == value.round())).all()):
            fb.fail(f"return token ids: integers in [0, {V})")
            return fb
        draws.append(value.long())
    if not torch.equal(draws[0], draws[1]):
        fb.fail(
            "two calls with generators of the same seed gave different tokens: draw with the "
            "generator you are given (torch.multinomial(probs, 1, generator=generator))"
        )
        return fb
    if torch.equal(draws[0], draws[2]):
        fb.fail(
            "generators of different seeds gave the same tokens: sample (torch.multinomial), "
            "do not take the argmax"
        )
        return fb
    freq = torch.nn.functional.one_hot(draws[0], V).view(3, -1, V).double().mean(dim=1)  # (3, V)
    close = {name: bool((freq - p.double()).abs().max() < 0.05) for name, p in table.items()}
    if close["right"]:
        top = logits.topk(k, dim=-1).indices  # (B, k)
        outside = ~(draws[0][:, None] == top).any(dim=-1)  # (B,)
        if bool(outside.any()):
            fb.fail(f"{int(outside.sum())} draws are outside their row's top {k}")
            return fb
        rows = logits[::2000]  # (3, V); the last row's two largest logits tie
        first = run_learner_code(
            fb, fn, rows.clone(), 1, temperature, torch.Generator().manual_seed(2)
        )
        value = _as_float(first) if first is not None else None
        ids_ok = (
            value is not None
            and value.shape == (3,)
            and bool(((value >= 0) & (value < V) & (value == value.round())).all())
        )
        if first is None:
            fb.fail("the first calls worked, a later one did not (see the error above)")
        elif (
            not ids_ok
            or not bool((rows.gather(1, value.long()[:, None])[:, 0] == rows.max(-1).values).all())
        ):
            fb.fail("with k = 1 sampling must give the most probable token (greedy)")
        else:
            fb.ok(
                f"over {B} draws the token frequencies match softmax(logits / {temperature}) "
                f"over the top {k}; k = 1 gives greedy's token; the generator is used"
            )
        return fb
    fb.fail("the token frequencies over 6000 draws do not match softmax(logits / T) over the top k")
    for name, hit in close.items():
        if hit and name != "right":
            fb.fail(f"looks like: {name}")
            break
    return fb


def right_top_k_sample() -> Callable:
    def top_k_sample(logits, k, temperature, generator):
        scaled = logits / temperature  # (B, V)
        top = scaled.topk(k, dim=-1)  # (B, k): exactly k, even where logits tie
        kept = torch.full_like(scaled, float("-inf")).scatter(-1, top.indices, top.values)
        return torch.multinomial(kept.softmax(dim=-1), 1, generator=generator)[:, 0]  # (B,)

    return top_k_sample


CHECKS = {
    "greedy": (check_greedy, right_greedy),
    "beam_step": (check_beam_step, right_beam_step),
    "coverage_penalty": (check_coverage_penalty, right_coverage_penalty),
    "top_k_sample": (check_top_k_sample, right_top_k_sample),
}


guard(globals())  # an answer that is, or calls, a right answer above is refused
