"""Notebook 09's checkers pass the worked solutions and name the typical mistakes."""

import math
from collections import Counter

from transformer_lib.exercises import ex09_translation as ex09


def ngrams(tokens, n):
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def precision(hyp, ref, n):
    h, r = Counter(ngrams(hyp, n)), Counter(ngrams(ref, n))
    return sum(min(c, r[g]) for g, c in h.items()), sum(h.values())


def test_precision_solution_passes_and_mistakes_are_named():
    assert ex09.check_ngram_precision(precision).passed
    unclipped = lambda hyp, ref, n: (
        sum(1 for g in ngrams(hyp, n) if g in ngrams(ref, n)),
        len(ngrams(hyp, n)),
    )
    fb = ex09.check_ngram_precision(unclipped)
    assert not fb.passed and "not clipped" in str(fb)
    by_ref = lambda hyp, ref, n: (precision(hyp, ref, n)[0], len(ngrams(ref, n)))
    assert "the reference's n-grams" in str(ex09.check_ngram_precision(by_ref))
    short = lambda hyp, ref, n: precision(hyp[:-1], ref, n)
    assert not ex09.check_ngram_precision(short).passed


def bp(c, r):
    return 1.0 if c >= r else (0.0 if c == 0 else math.exp(1 - r / c))


def test_brevity_penalty_solution_passes_and_mistakes_are_named():
    assert ex09.check_brevity_penalty(bp).passed
    upside_down = lambda c, r: 1.0 if c >= r else (0.0 if c == 0 else math.exp(1 - c / r))
    assert "upside down" in str(ex09.check_brevity_penalty(upside_down))
    both_ways = lambda c, r: 0.0 if c == 0 else math.exp(1 - max(c, r) / min(c, r))
    assert "longer hypothesis" in str(ex09.check_brevity_penalty(both_ways))
    assert "return a float" in str(ex09.check_brevity_penalty(lambda c, r: "1"))


def test_repeats_solution_passes_and_mistakes_are_named():
    solution = lambda t, n: len(ngrams(t, n)) - len(set(ngrams(t, n)))
    assert ex09.check_repeats(solution).passed
    distinct = lambda t, n: sum(1 for c in Counter(ngrams(t, n)).values() if c > 1)
    assert "counted once" in str(ex09.check_repeats(distinct))
    assert not ex09.check_repeats(lambda t, n: 0).passed
