"""From sentences to sentences: tokenize, pad, decode (greedy or beam search), detokenize.

The one path from strings to translated strings, used by validation during training, the
``translate`` command line, the notebooks and the explorers.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence

import torch

from .data.batching import pad_rows
from .data.tokenizers import Tokenizer
from .search import beam_search, greedy_decode
from .model import Transformer


@torch.no_grad()
def translate(
    model: Transformer,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    sentences: Sequence[str],
    beam: int = 1,
    length_penalty: float = 0.6,
    max_len: Optional[int] = None,
    batch_size: int = 64,
) -> List[str]:
    """Translate each sentence, in input order; ``beam=1`` is greedy decoding, else beam
    search with GNMT's length penalty ``length_penalty`` (the paper's beam 4, α 0.6, §6.1).

    Sentences are batched by length (less padding); a source longer than the model's
    positional table is cut to ``config.max_len`` tokens (:func:`source_report` counts
    them); a blank sentence (nothing but white space) gives "".
    ``max_len``: the longest output in tokens (default: the model's ``max_len``)."""
    if isinstance(sentences, str):
        raise TypeError("sentences must be a sequence of str, got one str: wrap it in a list")
    c = model.config
    max_len = c.max_len if max_len is None else max_len
    device = next(model.parameters()).device
    ids = [src_tok.encode(s)[: c.max_len] if s.strip() else [] for s in sentences]
    todo = sorted((i for i in range(len(ids)) if ids[i]), key=lambda i: len(ids[i]))
    out = [""] * len(ids)
    bos_id, eos_id = tgt_tok.bos_id, tgt_tok.eos_id
    for start in range(0, len(todo), batch_size):
        rows = todo[start : start + batch_size]
        src = pad_rows([ids[i] for i in rows], c.pad_id).to(device)  # (B, S)
        hyp = (
            greedy_decode(model, src, max_len, bos_id=bos_id, eos_id=eos_id)
            if beam == 1
            else beam_search(
                model, src, max_len, beam, length_penalty, bos_id=bos_id, eos_id=eos_id
            )
        )  # (B, <=max_len)
        for r, i in enumerate(rows):
            out[i] = tgt_tok.decode(hyp[r].tolist())
    return out


class SourceReport(NamedTuple):
    """What :func:`translate` will do to the sources beyond translating them: ``cut``
    sentences longer than ``max_len`` tokens, ``unknown`` sentences holding characters
    outside the vocabulary (read as ``<unk>``), and those ``characters``."""

    cut: int
    unknown: int
    characters: List[str]


def source_report(src_tok: Tokenizer, sentences: Sequence[str], max_len: int) -> SourceReport:
    """Count the sentences :func:`translate` cuts to ``max_len`` tokens and those holding
    characters the source vocabulary lacks (first seen first)."""
    cut, unknown = 0, 0
    characters: Dict[str, None] = {}  # an ordered set
    for sentence in sentences:
        ids = src_tok.encode(sentence) if sentence.strip() else []
        cut += len(ids) > max_len
        if src_tok.unk_id in ids:
            unknown += 1
            for ch in dict.fromkeys(sentence):
                if ch not in characters and src_tok.unk_id in src_tok.encode(ch):
                    characters[ch] = None
    return SourceReport(cut, unknown, list(characters))
