"""Translation quality on decoded strings: exact match and BLEU (sacrebleu)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import sacrebleu
import torch

from ..data.tokenizers import Tokenizer
from ..model import Transformer
from ..sentences import translate


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Fraction of hypotheses equal to their reference (after stripping outer spaces)."""
    _check_lengths(hypotheses, references)
    if not references:
        return 0.0
    hits = sum(h.strip() == r.strip() for h, r in zip(hypotheses, references))
    return hits / len(references)


def bleu(hypotheses: Sequence[str], references: Sequence[str], tokenize: str = "13a") -> float:
    """Corpus BLEU (0-100) with ``sacrebleu.corpus_bleu`` and one reference per sentence.

    ``tokenize="13a"`` is sacrebleu's (WMT) default. It splits punctuation off, so an ISO date
    is not one word for it: ``2021-03-05`` becomes five tokens, ``2021 - 03 - 05``, of which
    the two hyphens are right in every well-formed output and each number is right or wrong
    as a whole. ``"char"`` scores character n-grams instead, which gives a near miss (one
    wrong digit) partial credit: the finer choice for short, fixed-format outputs such as
    dates.
    """
    _check_lengths(hypotheses, references)
    return sacrebleu.corpus_bleu(list(hypotheses), [list(references)], tokenize=tokenize).score


def evaluate_translation(
    model: Transformer,
    pairs: Sequence[Tuple[str, str]],
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    max_len: Optional[int],
    bleu_tokenize: str = "13a",
    device: Union[str, torch.device] = "cpu",
) -> Dict[str, Any]:
    """Exact match and BLEU of greedy translations of ``pairs`` [(source, reference)].
    ``device`` is accepted for older callers; the model's own device is used."""
    was_training = model.training
    model.eval()
    hyps = translate(
        model, src_tok, tgt_tok, [s for s, _ in pairs], max_len=max_len, batch_size=256
    )
    model.train(was_training)
    refs = [t for _, t in pairs]
    return {
        "exact_match": exact_match(hyps, refs),
        "bleu": bleu(hyps, refs, bleu_tokenize),
        "hypotheses": hyps,
    }


def ngrams(tokens: Sequence[str], n: int) -> List[Tuple[str, ...]]:
    """Every n-gram of ``tokens``, in order, overlapping: len(tokens) - n + 1 of them."""
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def clipped_matches(hyp: Sequence[str], ref: Sequence[str], n: int) -> Tuple[int, int]:
    """(matches, total): the output's n-grams found in the reference, each counted at most
    as often as the reference holds it (BLEU's "modified" precision), over all of them."""
    h, r = Counter(ngrams(hyp, n)), Counter(ngrams(ref, n))
    return sum(min(c, r[g]) for g, c in h.items()), sum(h.values())


def brevity_penalty(hyp_len: int, ref_len: int) -> float:
    """BLEU's brevity penalty: 1 for an output at least as long as the reference, else
    exp(1 - ref_len / hyp_len) (0 for an empty output)."""
    if hyp_len >= ref_len:
        return 1.0
    return 0.0 if hyp_len == 0 else math.exp(1 - ref_len / hyp_len)


def repeats(tokens: Sequence[str], n: int) -> int:
    """How many n-grams of ``tokens`` repeat one seen earlier (a looping decoder's mark)."""
    grams = ngrams(tokens, n)
    return len(grams) - len(set(grams))


def _check_lengths(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(
            f"hypotheses and references differ in number: {len(hypotheses)} vs {len(references)}"
        )
