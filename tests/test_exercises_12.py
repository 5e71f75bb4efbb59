"""Notebook 12's exercise checkers: a right answer passes, each typical mistake gets "not yet"
with the mistake named, and the references agree with the library and with the table's
script."""

import math
import pytest

from transformer_lib.exercises import ex12_table3 as ex12


def not_yet(feedback, *words):
    text = str(feedback)
    assert not feedback and "not yet" in text, text
    for word in words:
        assert word in text, text


def test_verdict_passes_the_reference_and_names_each_mistake():
    assert ex12.check_verdict(ex12.verdict_reference)
    for message, mistake in ex12.VERDICT_MISTAKES.items():
        not_yet(ex12.check_verdict(mistake), message[:30])
    not_yet(ex12.check_verdict(lambda b, r, higher_is_better=True: "same"), "expected")
    not_yet(ex12.check_verdict(lambda b, r: "better"), "higher_is_better")


def test_verdict_reference_reads_ranges_not_means():
    assert ex12.verdict_reference([10.0, 12.0], [12.5, 13.0]) == "better"
    assert ex12.verdict_reference([10.0, 12.0], [11.9, 30.0]) == "within the noise"
    assert ex12.verdict_reference([30.0, 31.0], [29.0, 29.5], higher_is_better=False) == "better"


def test_dev_perplexity_passes_the_reference_and_names_each_mistake():
    assert ex12.check_dev_perplexity(ex12.dev_perplexity_reference)
    model, batches = ex12._tiny_set(0)
    for message, value in ex12._perplexity_mistakes(model, batches).items():
        wrong = math.log(value) if "nats" in message else value
        not_yet(ex12.check_dev_perplexity(lambda m, b, v=wrong: v), message[:30])
    not_yet(ex12.check_dev_perplexity(lambda m, b: None), "return")


def test_dev_perplexity_reference_is_the_tables_perplexity():
    """benchmarks/table3.py scores its runs with the same definition: on the shipped model and
    twenty dev verses its ``evaluate`` gives the reference's figure."""
    import table3  # benchmarks/ is on the test path (pyproject.toml)

    from transformer_lib.batching import encode_pairs, token_batches
    from transformer_lib.checkpoint import load_model, shipped_checkpoint
    from transformer_lib.corpus import bible_en_fr

    pairs = bible_en_fr(max_words=15, n_valid=300, n_test=0)["valid"][:20]
    path = shipped_checkpoint("bible-en-fr")
    model, tok = load_model(path)
    batches = token_batches(encode_pairs(pairs, tok), 150, shuffle=False)
    assert len(batches) > 1
    scores = table3.evaluate(path, pairs, "cpu", beam=False)
    assert scores["ppl"] == pytest.approx(ex12.dev_perplexity_reference(model, batches), rel=1e-5)
    assert 1 < scores["ppl"] < 100 and 0 < scores["bleu_greedy"] <= 100
