"""Checkers for notebook 09 (translating real sentences): BLEU against several references,
chrF (the F-score of character n-grams), and greedy decoding that never repeats an n-gram."""

from __future__ import annotations

import math
from collections import Counter
from typing import Callable, Dict, List, Optional, Sequence

import sacrebleu
import torch
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.metrics.chrf import CHRF
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from ..config import TransformerConfig
from ..masks import padding_mask
from ..model import Transformer
from ..search import greedy_decode, inference, next_log_probs
from . import Feedback, as_number, keeps_rng, run_learner_code
from .own_work import guard, refuses

BOS, EOS = 1, 2


def _close(a: Optional[float], b: float) -> bool:
    return a is not None and math.isfinite(a) and abs(a - b) <= 1e-6 * max(1.0, abs(b))


def _scores(fb: Feedback, fn: Callable, cases: list, what: str) -> Optional[List[float]]:
    """The learner's score on every case, or None (with the reason) if one is missing."""
    scores = []
    for case in cases:
        got = run_learner_code(fb, fn, *case)
        got = None if got is None else as_number(fb, got, what)
        if got is None or not math.isfinite(got):
            if got is not None:
                fb.fail(f"{what} should be a finite number, got {got}")
            return None
        scores.append(got)
    return scores


def _compare(fb: Feedback, scores: List[float], want: List[float], labels: List[str],
             mistakes: Dict[str, List[float]], what: str) -> bool:
    """Pass when every score equals ``want``; else show the first difference and name the
    mistake (a list of values) that every score equals."""
    wrong = [i for i, (g, w) in enumerate(zip(scores, want)) if not _close(g, w)]
    if not wrong:
        return True
    i = wrong[0]
    fb.fail(f"{labels[i]}: {what} {scores[i]:.4f}, sacrebleu gives {want[i]:.4f}")
    if all(_close(g, w / 100) for g, w in zip(scores, want)):
        fb.fail("looks like: a score between 0 and 1; report it times 100")
    for message, values in mistakes.items():
        if all(_close(g, v) for g, v in zip(scores, values)):
            fb.fail(f"looks like: {message}")
            break
    return False


# Exercise 1: BLEU with several references --------------------------------------------------
def _words(text: str) -> List[str]:
    return Tokenizer13a()(text).split()


def _grams(tokens: Sequence, n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def multi_reference_bleu_reference(hyps, refs, clip="max", length="closest") -> float:
    """Corpus BLEU with ``refs[i]`` the references of ``hyps[i]``; ``clip`` and ``length``
    select the right rule ("max", "closest") or a typical mistake ("sum"; "shortest",
    "first", "mean"; ``clip="first"`` scores against the first reference alone)."""
    matches, totals, c, r = [0] * 4, [0] * 4, 0, 0.0
    for hyp, options in zip(hyps, refs):
        h = _words(hyp)
        rs = [_words(x) for x in (options[:1] if clip == "first" else options)]
        lengths = [len(x) for x in rs]
        c += len(h)
        r += {
            "closest": lambda: min(lengths, key=lambda L: (abs(L - len(h)), L)),
            "shortest": lambda: min(lengths),
            "first": lambda: lengths[0],
            "mean": lambda: sum(lengths) / len(lengths),
        }[length]()
        for n in range(1, 5):
            allowed: Counter = Counter()
            for x in rs:  # | keeps the larger count, + adds them up
                allowed = allowed + _grams(x, n) if clip == "sum" else allowed | _grams(x, n)
            found = _grams(h, n)
            matches[n - 1] += sum(min(k, allowed[g]) for g, k in found.items())
            totals[n - 1] += sum(found.values())
    if min(matches) == 0:
        return 0.0
    bp = 1.0 if c >= r else math.exp(1 - r / c)
    return 100 * bp * math.exp(sum(math.log(m / t) for m, t in zip(matches, totals)) / 4)


BLEU_CASES = [
    (  # outputs closer to the second reference; one repeats a word each reference holds once
        [
            "Il leur dit: Allez, et l'Éternel sera avec vous.",
            "Moïse dit au peuple: Ne craignez point, ne craignez point.",
            "Le roi envoya des messagers à Jérusalem.",
        ],
        [
            [
                "Il leur dit: Allez, que l'Éternel soit avec vous!",
                "Et il leur dit: Allez, et l'Éternel sera avec vous.",
            ],
            [
                "Moïse répondit au peuple: Ne craignez rien.",
                "Moïse dit au peuple: Ne craignez point; restez en place.",
            ],
            [
                "Le roi envoya des messagers dans Jérusalem, vers tout le peuple.",
                "Le roi envoya des messagers à Jérusalem.",
            ],
        ],
    ),
    (  # outputs a little shorter than the closest reference: the brevity penalty
        ["Dieu vit que la lumière était bonne.", "Le peuple entendit la voix de Dieu."],
        [
            [
                "Dieu vit que la lumière était bonne; et Dieu sépara la lumière d'avec "
                "les ténèbres.",
                "Et Dieu vit que la lumière était bonne.",
                "Dieu vit la lumière.",
            ],
            [
                "Le peuple entendit la voix de l'Éternel, son Dieu, et il eut peur.",
                "Tout le peuple entendit la voix de l'Éternel.",
                "Le peuple entendit.",
            ],
        ],
    ),
    (  # one reference each: ordinary BLEU
        ["Abraham dit: Je le jurerai.", "Elle enfanta un fils, et l'appela Er."],
        [
            ["Abraham dit: Je le jurerai."],
            ["Elle devint enceinte, et enfanta un fils, qu'elle appela Er."],
        ],
    ),
]

BLEU_MISTAKES = {
    "the references' counts were added up; clip each n-gram by its largest count in any "
    "one reference (max, not sum)": dict(clip="sum"),
    "r is the shortest reference's length; for each output, take the length of the "
    "reference closest to the output's (the shorter on a tie)": dict(length="shortest"),
    "r is the mean of the references' lengths; take the length of the one closest to the "
    "output's": dict(length="mean"),
    "r is the first reference's length; take the one closest to the output's": dict(
        length="first"
    ),
    "only the first reference is used; an n-gram matches when any reference holds it": dict(
        clip="first", length="first"
    ),
}


@refuses(
    sacrebleu.corpus_bleu,
    sacrebleu.sentence_bleu,
    BLEU,
    rule="to compute BLEU yourself, without sacrebleu's BLEU",
)
def check_multi_reference_bleu(fn: Callable) -> Feedback:
    """``fn(hyps, refs)`` -> corpus BLEU (0-100), ``refs[i]`` the references of ``hyps[i]``."""
    fb = Feedback("Exercise 1 (BLEU with several references)")
    cases = [(list(hyps), [list(r) for r in refs]) for hyps, refs in BLEU_CASES]
    scores = _scores(fb, fn, cases, "BLEU")
    if scores is None:
        return fb
    want = [sacrebleu.corpus_bleu(h, [list(c) for c in zip(*r)]).score for h, r in BLEU_CASES]
    labels = [f"{len(h)} outputs, {len(r[0])} references each" for h, r in BLEU_CASES]
    mistakes = {m: [multi_reference_bleu_reference(h, r, **kw) for h, r in BLEU_CASES]
                for m, kw in BLEU_MISTAKES.items()}
    if not _compare(fb, scores, want, labels, mistakes, "BLEU"):
        return fb
    fb.ok("equal to sacrebleu's corpus_bleu with two and three references per output, and "
          "with one")
    return fb


# Exercise 2: chrF ----------------------------------------------------------------------------
def chrf_reference(hyp: str, ref: str, beta: float = 2.0, spaces: bool = False,
                   average: str = "precision and recall", clip: bool = True) -> float:
    """Sentence chrF (Popović, 2015): character 1- to 6-grams without spaces, precision and
    recall averaged over the orders both texts have, then F_beta; ``spaces``, ``average="F"``
    and ``clip=False`` are typical mistakes."""
    P = R = F = 0.0
    orders = 0
    for n in range(1, 7):
        h, r = (_grams(t if spaces else "".join(t.split()), n) for t in (hyp, ref))
        if not h or not r:
            continue
        m = sum((h & r).values()) if clip else sum(k for g, k in h.items() if g in r)
        p, rc = m / sum(h.values()), m / sum(r.values())
        P, R, orders = P + p, R + rc, orders + 1
        F += (1 + beta**2) * p * rc / (beta**2 * p + rc) if p + rc else 0.0
    if orders == 0:
        return 0.0
    if average == "F":
        return 100 * F / orders
    P, R = P / orders, R / orders
    return 100 * (1 + beta**2) * P * R / (beta**2 * P + R) if P + R else 0.0


CHRF_CASES = [
    ("Il leur dit: Allez en paix.", "Il leur répondit: Allez en paix!"),
    ("Les enfants d'Israël partirent.", "Les enfants d'Israël partirent de Ramsès."),
    ("Et Dieu dit: Que la lumière soit!", "Dieu dit: Que la lumière soit! Et la lumière fut."),
    ("le le le le roi", "le roi"),
    ("Amen!", "Amen."),
    ("Jéhovah", "Josaphat"),
]

CHRF_MISTAKES = {
    "spaces are counted as characters; chrF removes them before taking n-grams": dict(
        spaces=True
    ),
    "beta = 1 (F1); chrF uses beta = 2, recall counting twice as much as precision": dict(
        beta=1.0
    ),
    "matches are not clipped: an n-gram counts at most as often as the reference holds "
    "it (the minimum of the two counts)": dict(clip=False),
    "an F-score per order, averaged; sacrebleu averages precision and recall over the "
    "orders first, then takes one F-score": dict(average="F"),
}


@refuses(
    sacrebleu.sentence_chrf,
    sacrebleu.corpus_chrf,
    CHRF,
    rule="to compute chrF yourself, without sacrebleu's chrF",
)
def check_chrf(fn: Callable) -> Feedback:
    """``fn(hyp, ref)`` -> sentence chrF (0-100), equal to ``sacrebleu.sentence_chrf``."""
    fb = Feedback("Exercise 2 (chrF, an F-score of character n-grams)")
    scores = _scores(fb, fn, CHRF_CASES, "chrF")
    if scores is None:
        return fb
    want = [sacrebleu.sentence_chrf(h, [r]).score for h, r in CHRF_CASES]
    labels = [f"chrf({h!r}, {r!r})" for h, r in CHRF_CASES]
    mistakes = {m: [chrf_reference(h, r, **kw) for h, r in CHRF_CASES]
                for m, kw in CHRF_MISTAKES.items()}
    mistakes["precision and recall swapped: recall is matches / the reference's n-grams, "
             "and beta = 2 weighs it"] = [chrf_reference(r, h) for h, r in CHRF_CASES]
    if not _compare(fb, scores, want, labels, mistakes, "chrF"):
        return fb
    fb.ok(f"equal to sacrebleu's sentence_chrf on {len(CHRF_CASES)} pairs, including texts "
          "shorter than 6 characters")
    return fb


# Exercise 3: greedy decoding that never repeats an n-gram -----------------------------------
def banned(seq: List[int], n: int) -> set:
    """The tokens that would complete an n-gram already in ``seq``."""
    if len(seq) < n - 1:
        return set()
    prefix = tuple(seq[len(seq) - (n - 1) :])
    return {seq[i + n - 1] for i in range(len(seq) - n + 1) if tuple(seq[i : i + n - 1]) == prefix}


def no_repeat_reference(model: Transformer, src: torch.Tensor, max_len: int, n: int,
                        with_bos: bool = False) -> List[int]:
    """Greedy decoding of one source (1, S) in which no n-gram of the output occurs twice;
    ``with_bos`` (a mistake) counts BOS as part of the output's n-grams."""
    with inference(model):
        src_mask = padding_mask(src, model.config.pad_id)                    # (1, 1, 1, S)
        memory = model.encode(src, src_mask)                                 # (1, S, D)
        ys, out, cache = torch.tensor([[BOS]]), [], model.new_cache()
        for _ in range(max_len):
            log_probs = next_log_probs(model, ys, memory, src_mask, cache)[0]  # (V,)
            for token in banned(([BOS] if with_bos else []) + out, n):
                log_probs[token] = float("-inf")
            token = int(log_probs.argmax())
            out.append(token)
            ys = torch.cat((ys, torch.tensor([[token]])), dim=1)              # (1, t + 1)
            if token == EOS:
                break
    return out


def _loop_models():
    """Small random models that loop under plain greedy decoding, with a source each."""
    cases = []
    for seed, V, n in ((0, 12, 2), (1, 16, 3), (2, 10, 2), (3, 14, 3)):
        torch.manual_seed(seed)
        model = Transformer(TransformerConfig.tiny(V, N=1, d_model=16, d_ff=32, h=2, P_drop=0.0))
        src = torch.randint(4, V, (1, 6), generator=torch.Generator().manual_seed(seed))
        cases.append((model, src, n))
    return cases


def _as_ids(fb: Feedback, got) -> Optional[List[int]]:
    if isinstance(got, torch.Tensor) and got.dim() <= 2 and (got.dim() < 2 or got.shape[0] == 1):
        got = got.reshape(-1).tolist()
    if isinstance(got, (list, tuple)) and all(
        isinstance(i, int) and not isinstance(i, bool) for i in got
    ):
        return list(got)
    fb.fail(f"return the ids as a list of ints, got {type(got).__name__}")
    return None


@keeps_rng
def check_greedy_no_repeat(fn: Callable) -> Feedback:
    """``fn(model, src, max_len, n)`` -> the ids after BOS of a greedy translation of the
    (1, S) ``src`` in which no n-gram occurs twice."""
    fb = Feedback("Exercise 3 (greedy decoding without repeated n-grams)")
    max_len = 16
    for model, src, n in _loop_models():
        got = run_learner_code(fb, fn, model, src.clone(), max_len, n)
        if got is None:
            return fb
        got = _as_ids(fb, got)
        if got is None:
            return fb
        want = no_repeat_reference(model, src, max_len, n)
        if got == want:
            continue
        fb.fail(f"with n = {n} you get {got}, expected {want}")
        plain = greedy_decode(model, src, max_len)[0]
        mistakes = {
            "a start token in front: return the ids after BOS": [BOS] + want,
            "the output's n-grams counted with BOS in front; count only the tokens "
            "produced": no_repeat_reference(model, src, max_len, n, with_bos=True),
            f"({n + 1})-grams blocked: the n-gram a token completes is the last n - 1 tokens "
            "plus itself": no_repeat_reference(model, src, max_len, n + 1),
            f"({n - 1})-grams blocked: the n-gram a token completes is the last n - 1 tokens "
            "plus itself": no_repeat_reference(model, src, max_len, n - 1),
            "nothing is blocked: this is plain greedy decoding": plain[plain != 0].tolist(),
        }
        for message, ids in mistakes.items():
            if got == ids and ids != want:
                fb.fail(f"looks like: {message}")
                break
        return fb
    fb.ok("the same tokens as the reference on four small models whose plain greedy output "
          "loops, with n = 2 and n = 3")
    return fb


# The right answers, for the shared checker test ---------------------------------------------
def _right_bleu():
    def multi_reference_bleu(hyps, refs):
        return multi_reference_bleu_reference(hyps, refs)

    return multi_reference_bleu


def _right_chrf():
    def chrf(hyp, ref):
        return chrf_reference(hyp, ref)

    return chrf


def _right_greedy():
    def greedy_no_repeat(model, src, max_len, n):
        return no_repeat_reference(model, src, max_len, n)

    return greedy_no_repeat


CHECKS = {
    "multi_reference_bleu": (check_multi_reference_bleu, _right_bleu),
    "chrf": (check_chrf, _right_chrf),
    "greedy_no_repeat": (check_greedy_no_repeat, _right_greedy),
}


guard(globals())  # an answer that is, or calls, a right answer above is refused
