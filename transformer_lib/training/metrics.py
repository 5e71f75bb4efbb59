"""Translation quality on decoded strings: exact match and BLEU (sacrebleu)."""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import sacrebleu
import torch


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Fraction of hypotheses equal to their reference (after stripping outer spaces)."""
    _check_lengths(hypotheses, references)
    if not references:
        return 0.0
    hits = sum(h.strip() == r.strip() for h, r in zip(hypotheses, references))
    return hits / len(references)


def bleu(hypotheses: Sequence[str], references: Sequence[str], tokenize: str = "13a") -> float:
    """Corpus BLEU (0-100) with ``sacrebleu.corpus_bleu`` and one reference per sentence.

    ``tokenize="13a"`` is sacrebleu's (WMT) default; ``"char"`` scores characters, the
    meaningful choice for one-word outputs such as ISO dates.
    """
    _check_lengths(hypotheses, references)
    return sacrebleu.corpus_bleu(list(hypotheses), [list(references)], tokenize=tokenize).score


@torch.no_grad()
def translate(model, sources: Sequence[str], src_tok, tgt_tok, max_len: int,
              batch_size: int = 256, device="cpu") -> List[str]:
    """Greedy-decode each source string into a target string (in input order)."""
    from ..decoding import greedy_decode

    out: List[str] = []
    for i in range(0, len(sources), batch_size):
        ids = [src_tok.encode(s) for s in sources[i:i + batch_size]]   # as encode_pairs
        S = max(len(x) for x in ids)
        src = torch.full((len(ids), S), src_tok.pad_id, dtype=torch.long)    # (B, S)
        for row, x in enumerate(ids):
            src[row, :len(x)] = torch.tensor(x)
        hyp = greedy_decode(model, src.to(device), max_len, bos_id=tgt_tok.bos_id,
                            eos_id=tgt_tok.eos_id)                           # (B, <=max_len)
        out += [tgt_tok.decode(row.tolist()) for row in hyp.cpu()]
    return out


def evaluate_translation(model, pairs: Sequence[Tuple[str, str]], src_tok, tgt_tok,
                         max_len: int, bleu_tokenize: str = "13a", device="cpu"
                         ) -> Dict[str, object]:
    """Exact match and BLEU of greedy translations of ``pairs`` [(source, reference)]."""
    was_training = model.training
    model.eval()
    hyps = translate(model, [s for s, _ in pairs], src_tok, tgt_tok, max_len, device=device)
    model.train(was_training)
    refs = [t for _, t in pairs]
    return {"exact_match": exact_match(hyps, refs), "bleu": bleu(hyps, refs, bleu_tokenize),
            "hypotheses": hyps}


def _check_lengths(hypotheses, references) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(f"hypotheses and references differ in number: "
                         f"{len(hypotheses)} vs {len(references)}")
