"""Checkers for notebook 09 (translating real sentences): BLEU's clipped n-gram precision,
its brevity penalty, and counting repeated n-grams (a symptom of a looping decoder)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Callable, Sequence

from ..training.metrics import brevity_penalty, clipped_matches, ngrams, repeats
from . import Feedback, run_learner_code
from .own_work import refuses

Tokens = Sequence[str]


PRECISION_CASES = [
    ("le le le le le le le".split(), "le chat est sur le tapis".split(), 1),
    ("le chat est sur le tapis .".split(), "le chat est sur le tapis .".split(), 2),
    ("il dit : va , et il alla .".split(), "et il dit : va . il alla .".split(), 2),
    ("a b c d".split(), "a b c d e".split(), 4),
    ("a b".split(), "a b c".split(), 3),
]


@refuses(clipped_matches, rule="to count without the library's `clipped_matches`")
def check_ngram_precision(fn: Callable) -> Feedback:
    """``fn(hyp_tokens, ref_tokens, n)`` -> (matches, total) with clipped counts."""
    fb = Feedback("Exercise 1 (BLEU's clipped n-gram precision)")
    for hyp, ref, n in PRECISION_CASES:
        got = run_learner_code(fb, fn, list(hyp), list(ref), n)
        if got is None:
            return fb
        if not (
            isinstance(got, (tuple, list))
            and len(got) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in got)
        ):
            fb.fail(f"return a pair of ints (matches, total), got {got!r}")
            return fb
        want = clipped_matches(hyp, ref, n)
        if tuple(got) == want:
            continue
        fb.fail(
            f"for hyp {' '.join(hyp)!r}, ref {' '.join(ref)!r}, n={n}: got {tuple(got)}, "
            f"expected {want}"
        )
        h, r = ngrams(hyp, n), Counter(ngrams(ref, n))
        if got[0] == sum(1 for g in h if r[g]) and got[0] != want[0]:
            fb.fail(
                "looks like: matches are not clipped; a hypothesis n-gram counts at most "
                "as many times as the reference holds it (min of the two counts)"
            )
        elif got[1] == len(ngrams(ref, n)) and got[1] != want[1]:
            fb.fail(
                "looks like: total counts the reference's n-grams; precision divides by "
                "the hypothesis's"
            )
        elif got[1] == max(len(hyp) - n, 0) and got[1] != want[1]:
            fb.fail(
                "looks like: one n-gram too few; a sequence of L tokens has L - n + 1 "
                "n-grams (range(len(tokens) - n + 1))"
            )
        return fb
    fb.ok(
        "clipped matches and totals on " + str(len(PRECISION_CASES)) + " cases, including "
        "'le le le ...' against a reference with two 'le'"
    )
    return fb


@refuses(brevity_penalty, rule="to write it yourself, not with the library's `brevity_penalty`")
def check_brevity_penalty(fn: Callable) -> Feedback:
    """``fn(hyp_len, ref_len)`` -> BLEU's brevity penalty (a float in [0, 1])."""
    fb = Feedback("Exercise 2 (BLEU's brevity penalty)")
    cases = [(10, 10), (12, 10), (8, 10), (5, 20), (1, 3), (0, 4)]
    for case in cases:
        got = run_learner_code(fb, fn, *case)
        if got is None:
            return fb
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            fb.fail(f"return a float, got {type(got).__name__} for {case}")
            return fb
        want = brevity_penalty(*case)
        if abs(float(got) - want) <= 1e-9:
            continue
        fb.fail(f"bp{case} = {float(got):.4f}, expected {want:.4f}")
        c, r = case
        if c < r and c > 0 and abs(float(got) - math.exp(1 - c / r)) < 1e-9:
            fb.fail(
                "looks like: the ratio is upside down; it is exp(1 - r/c), r the "
                "reference length and c the hypothesis's"
            )
        elif c > r and float(got) < 1:
            fb.fail(
                "looks like: a longer hypothesis is penalised; only a shorter one is "
                "(precision already punishes extra words)"
            )
        return fb
    fb.ok("1 when the hypothesis is at least as long, exp(1 - r/c) when shorter, 0 when empty")
    return fb


@refuses(repeats, rule="to count them yourself, not with the library's `repeats`")
def check_repeats(fn: Callable) -> Feedback:
    """``fn(tokens, n)`` -> how many n-grams repeat one seen earlier."""
    fb = Feedback("Exercise 3 (counting repeated n-grams)")
    cases = [
        ("de la maison de la maison de la maison".split(), 3),
        ("le peuple , le peuple".split(), 2),
        ("et il dit".split(), 1),
        ("a a a a".split(), 1),
        ("a b".split(), 3),
    ]
    for tokens, n in cases:
        got = run_learner_code(fb, fn, list(tokens), n)
        if got is None:
            return fb
        if isinstance(got, bool) or not isinstance(got, int):
            fb.fail(f"return an int, got {type(got).__name__}")
            return fb
        want = repeats(tokens, n)
        if got == want:
            continue
        fb.fail(f"for {' '.join(tokens)!r}, n={n}: got {got}, expected {want}")
        grams = Counter(ngrams(tokens, n))
        if got == sum(1 for c in grams.values() if c > 1):
            fb.fail(
                "looks like: each repeated n-gram was counted once; count every "
                "occurrence after its first (all n-grams minus the distinct ones)"
            )
        elif got == len(ngrams(tokens[:-1], n)) - len(set(ngrams(tokens[:-1], n))):
            fb.fail("looks like: the last n-gram was left out (range(len(tokens) - n + 1))")
        return fb
    fb.ok("repeats counted on 'de la maison de la maison ...' and four other cases")
    return fb
