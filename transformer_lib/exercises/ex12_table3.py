"""Checkers for notebook 12's exercises (the paper's Table 3 at laptop scale): whether a row
differs from the base by more than the noise of the seeds, and the dev perplexity the table
reports, measured as the paper measures it."""

from __future__ import annotations

import math
import random
import statistics
from typing import Callable, List

import torch
import torch.nn.functional as F

from ..batching import Batch, make_batch
from ..config import TransformerConfig
from ..model import Transformer
from . import Feedback, as_number, keeps_rng, run_learner_code
from .own_work import guard

# --- Exercise 1: a trend or the noise of the seeds ------------------------------------------


def verdict_reference(base: List[float], row: List[float], higher_is_better: bool = True) -> str:
    """ "better" or "worse" than the base when every seed of the row lies beyond every seed of
    the base, else "within the noise" (the ranges over the seeds overlap or touch)."""
    if min(row) > max(base):
        return "better" if higher_is_better else "worse"
    if max(row) < min(base):
        return "worse" if higher_is_better else "better"
    return "within the noise"


def _means_only(base, row, higher_is_better=True):
    diff = statistics.mean(row) - statistics.mean(base)
    if diff == 0:
        return "within the noise"
    return "better" if (diff > 0) == higher_is_better else "worse"


def _direction_ignored(base, row, higher_is_better=True):
    return verdict_reference(base, row, True)


def _first_seeds(base, row, higher_is_better=True):
    return verdict_reference(base[:1], row[:1], higher_is_better)


VERDICT_CASES = [  # (base, row, higher_is_better): BLEU and perplexity over seeds
    ([10.5, 10.3], [9.1, 8.8], True),
    ([10.5, 10.3], [10.9, 10.4], True),
    ([10.5, 10.3], [10.8, 11.2], True),
    ([29.9, 30.0], [31.5, 32.2], False),
    ([29.9, 30.0], [27.0, 28.1], False),
    ([29.9, 30.0], [30.0, 30.6], False),
    ([12.4, 11.7, 12.0], [12.3, 13.1], True),
    ([12.4, 11.7], [11.2, 12.9], True),
    ([5.0], [5.0], True),
]
VERDICT_MISTAKES = {
    "you compared the means only: a difference of means smaller than the seeds' own spread "
    "is the noise of the seeds": _means_only,
    "the direction is ignored: for perplexity lower is better (higher_is_better=False)": (
        _direction_ignored
    ),
    "only the first seed of each: one run of each says nothing about the spread": _first_seeds,
}


@keeps_rng
def check_verdict(verdict: Callable[..., str]) -> Feedback:
    """``verdict(base, row, higher_is_better=True)``: ``"better"``, ``"worse"`` or
    ``"within the noise"`` from two lists of per-seed scores."""
    fb = Feedback("Exercise 1 (a trend or the noise of the seeds)")
    answers = []
    for base, row, higher in VERDICT_CASES:
        got = run_learner_code(fb, verdict, list(base), list(row), higher_is_better=higher)
        if got is None:
            return fb
        answers.append(got)
    expected = [verdict_reference(*case) for case in VERDICT_CASES]
    wrong = [(c, g, e) for c, g, e in zip(VERDICT_CASES, answers, expected) if g != e]
    if not wrong:
        fb.ok(f"{len(VERDICT_CASES)} pairs of seed lists, BLEU and perplexity, ranges apart, "
              "overlapping and touching, seed counts unequal")  # fmt: skip
        fb.ok("with two seeds, ranges that part are a hint, not a proof: a third seed may land "
              "between them, so every claim of the table names its seeds and spread")  # fmt: skip
        return fb
    (base, row, higher), got, want = wrong[0]
    what = "BLEU" if higher else "perplexity"
    fb.fail(f"base {base}, row {row} ({what}): you say {got!r}, expected {want!r}")
    for message, mistake in VERDICT_MISTAKES.items():
        if all(a == mistake(b, r, h) for a, (b, r, h) in zip(answers, VERDICT_CASES)):
            fb.fail(f"looks like: {message}")
            break
    return fb


# --- Exercise 2: dev perplexity -----------------------------------------------------------------


def dev_perplexity_reference(model: Transformer, batches: List[Batch]) -> float:
    """exp of the plain cross-entropy per target token, </s> included, pads left out, over
    the whole set (every token weighs the same)."""
    total, tokens = 0.0, 0
    with torch.no_grad():
        for b in batches:
            logits = model(b.src, b.tgt_in)  # (B, T, V)
            total += F.cross_entropy(logits.flatten(0, 1), b.tgt_out.flatten(),
                                     ignore_index=0, reduction="sum").item()  # fmt: skip
            tokens += int((b.tgt_out != 0).sum())
    return math.exp(total / tokens)


def _per_batch(model: Transformer, batches: List[Batch], **kwargs) -> List[float]:
    with torch.no_grad():
        return [F.cross_entropy(model(b.src, b.tgt_in).flatten(0, 1), b.tgt_out.flatten(),
                                **kwargs).item() for b in batches]  # fmt: skip


def _perplexity_mistakes(model: Transformer, batches: List[Batch]) -> dict:
    means = _per_batch(model, batches, ignore_index=0)
    with_pads = _per_batch(model, batches, reduction="sum")
    smoothed = _per_batch(model, batches, ignore_index=0, reduction="sum", label_smoothing=0.1)
    tokens = sum(int((b.tgt_out != 0).sum()) for b in batches)
    cells = sum(b.tgt_out.numel() for b in batches)
    return {
        "a mean of the batches' means: a short batch weighs as much as a long one; add up the "
        "loss and the tokens over the whole set, then divide": math.exp(sum(means) / len(means)),
        "a mean of each batch's perplexity: exp of the mean of the losses is not the mean of "
        "their exps": sum(math.exp(m) for m in means) / len(means),
        "the pads are counted (ignore_index=0 leaves them out of the loss and of the count)": (
            math.exp(sum(with_pads) / cells)
        ),
        "measured with the label-smoothed loss: perplexity is that of the true next token, "
        "plain cross-entropy": math.exp(sum(smoothed) / tokens),
        "the loss in nats, not its exp": dev_perplexity_reference(model, batches),
    }


def _tiny_set(seed: int) -> tuple:
    """A small random model and three batches of unequal sizes with pads in them."""
    torch.manual_seed(seed)
    cfg = TransformerConfig(src_vocab_size=23, tgt_vocab_size=23, d_model=16, N=1, h=2, d_ff=32,
                            P_drop=0.0, max_len=24)  # fmt: skip
    model = Transformer(cfg).eval()
    rng = random.Random(seed)

    def example(most: int) -> tuple:
        return ([rng.randrange(3, 23) for _ in range(rng.randint(1, most))],
                [rng.randrange(3, 23) for _ in range(rng.randint(1, most))])  # fmt: skip

    batches = [make_batch([example(most) for _ in range(n)])
               for n, most in ((7, 4), (2, 15), (4, 9))]  # fmt: skip
    return model, batches


@keeps_rng
def check_dev_perplexity(dev_perplexity: Callable[[Transformer, List[Batch]], float]) -> Feedback:
    """``dev_perplexity(model, batches)``: exp of the cross-entropy per non-pad target token
    over all ``batches``, a number."""
    fb = Feedback("Exercise 2 (dev perplexity, as the table measures it)")
    for seed in (0, 1):
        model, batches = _tiny_set(seed)
        value = run_learner_code(fb, dev_perplexity, model, batches)
        got = None if value is None else as_number(fb, value, "dev_perplexity(model, batches)")
        if got is None:
            return fb
        want = dev_perplexity_reference(model, batches)
        if not math.isclose(got, want, rel_tol=1e-4):
            fb.fail(f"dev_perplexity gives {got:.4f}, expected {want:.4f}")
            mistakes = _perplexity_mistakes(model, batches)
            wrong = mistakes.pop("the loss in nats, not its exp")
            if math.isclose(got, math.log(wrong), rel_tol=1e-4):
                fb.fail("looks like: the loss in nats, not its exp")
            for message, value in mistakes.items():
                if math.isclose(got, value, rel_tol=1e-4):
                    fb.fail(f"looks like: {message}")
                    break
            return fb
    fb.ok("exp of the cross-entropy per target token over the whole set, pads left out, on two "
          "sets of three batches of unequal sizes")  # fmt: skip
    fb.ok("a perplexity of P: on average the model is as unsure as a fair choice among P tokens")
    return fb


CHECKS = {
    "verdict": (check_verdict, lambda: verdict_reference),
    "dev_perplexity": (check_dev_perplexity, lambda: dev_perplexity_reference),
}


guard(globals())  # an answer that is, or calls, a right answer above is refused
