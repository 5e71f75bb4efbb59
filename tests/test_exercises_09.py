"""Notebook 09's exercise checkers: right answers pass, typical mistakes are refused by name,
sacrebleu's own scores are refused where the exercise says "without", and no answer makes a
checker raise."""

import math
from collections import Counter

import sacrebleu
import torch

from transformer_lib.exercises import ex09_translation as ex09


def refused(feedback, *words):
    text = str(feedback)
    return not feedback.passed and "not yet" in text and all(w in text for w in words)


def test_the_references_equal_sacrebleu():
    for hyps, refs in ex09.BLEU_CASES:
        streams = [list(column) for column in zip(*refs)]
        want = sacrebleu.corpus_bleu(hyps, streams).score
        assert math.isclose(ex09.multi_reference_bleu_reference(hyps, refs), want, rel_tol=1e-9)
    for hyp, ref in ex09.CHRF_CASES:
        want = sacrebleu.sentence_chrf(hyp, [ref]).score
        assert math.isclose(ex09.chrf_reference(hyp, ref), want, rel_tol=1e-9)


def test_every_right_answer_passes():
    for name, (checker, right) in ex09.CHECKS.items():
        assert checker(right()), name


def bleu_with(**mistake):
    return lambda hyps, refs: ex09.multi_reference_bleu_reference(hyps, refs, **mistake)


def test_multi_reference_bleu_mistakes_are_named():
    check = ex09.check_multi_reference_bleu
    assert refused(check(bleu_with(clip="sum")), "max, not sum")
    assert refused(check(bleu_with(length="shortest")), "shortest reference")
    assert refused(check(bleu_with(length="first")), "first reference's length")
    assert refused(check(bleu_with(clip="first", length="first")), "only the first reference")
    assert refused(check(lambda h, r: bleu_with()(h, r) / 100), "times 100")


def test_sacrebleu_is_refused_where_the_exercise_says_without_it():
    def with_sacrebleu(hyps, refs):
        return sacrebleu.corpus_bleu(hyps, [list(c) for c in zip(*refs)]).score

    assert refused(ex09.check_multi_reference_bleu(with_sacrebleu), "without sacrebleu")
    chrf = lambda hyp, ref: sacrebleu.sentence_chrf(hyp, [ref]).score
    assert refused(ex09.check_chrf(chrf), "without sacrebleu")


def chrf_with(**mistake):
    return lambda hyp, ref: ex09.chrf_reference(hyp, ref, **mistake)


def test_chrf_mistakes_are_named():
    check = ex09.check_chrf
    assert refused(check(chrf_with(spaces=True)), "spaces")
    assert refused(check(chrf_with(beta=1.0)), "beta = 1")
    assert refused(check(chrf_with(clip=False)), "not clipped")
    assert refused(check(chrf_with(average="F")), "averaged")
    assert refused(check(lambda hyp, ref: ex09.chrf_reference(ref, hyp)), "swapped")

    def word_ngrams(hyp, ref):
        h, r = Counter(hyp.split()), Counter(ref.split())
        m = sum((h & r).values())
        return 100 * m / max(sum(h.values()), 1)

    assert refused(check(word_ngrams), "sacrebleu gives")


def no_repeat_with(shift=0, with_bos=False):
    def decode(model, src, max_len, n):
        return ex09.no_repeat_reference(model, src, max_len, n + shift, with_bos=with_bos)

    return decode


def test_greedy_no_repeat_mistakes_are_named():
    check = ex09.check_greedy_no_repeat
    assert refused(check(no_repeat_with(shift=1)), "grams blocked")
    assert refused(check(no_repeat_with(shift=-1)), "grams blocked")
    assert refused(check(no_repeat_with(with_bos=True)), "BOS")
    plain = lambda model, src, max_len, n: ex09.greedy_decode(model, src, max_len)[0].tolist()
    assert refused(check(plain), "plain greedy")
    with_start = lambda *args: [1] + ex09.no_repeat_reference(*args)
    assert refused(check(with_start), "after BOS")


def test_checkers_answer_odd_answers_without_raising():
    as_tensor = lambda *args: torch.tensor(ex09.no_repeat_reference(*args))
    assert ex09.check_greedy_no_repeat(as_tensor)  # a tensor of ids is an answer too
    assert refused(ex09.check_greedy_no_repeat(lambda *args: "ids"), "list of ints")
    assert refused(ex09.check_chrf(lambda hyp, ref: float("nan")), "finite")
    assert refused(ex09.check_chrf(lambda hyp, ref: [50.0]), "number")
    assert ex09.check_chrf(lambda hyp, ref: torch.tensor(ex09.chrf_reference(hyp, ref)))
    assert refused(ex09.check_multi_reference_bleu(lambda h, r: 1 / 0), "ZeroDivisionError")
