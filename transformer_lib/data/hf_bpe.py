"""The Hugging Face ``tokenizers`` side of :class:`~transformer_lib.data.tokenizers.BPETokenizer`:
training a byte-pair-encoding model (§5.1), reading one back from its JSON, and cutting
over-long "words" before training.

Every function imports ``tokenizers`` when called, so the package loads without it.
"""

from __future__ import annotations

import json
import warnings
from typing import Any, List

from .special_tokens import SPECIAL_TOKENS, UNK


def train_bpe(texts: List[str], vocab_size: int, min_frequency: int, show_progress: bool) -> Any:
    """A ``tokenizers.Tokenizer`` with a BPE model learned on ``texts`` until ``vocab_size``
    tokens, the specials first (ids 0-3); ``Metaspace`` pre-tokenizer and decoder (spaces
    become ``"▁"``, as in SentencePiece), so decoding restores the spaces between words."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers, trainers

    hf = HFTokenizer(models.BPE(unk_token=UNK))
    hf.pre_tokenizer = pre_tokenizers.Metaspace()
    hf.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=show_progress,
    )
    hf.train_from_iterator(texts, trainer=trainer)
    return hf


def cut_long_words(texts: List[str], max_word: int) -> List[str]:
    """``texts`` with every run of more than ``max_word`` non-space characters cut into
    pieces (separate training texts), and a warning saying how many and where.

    BPE training time grows with the square of a word's length; encoding is not affected."""
    out, cut = [], []
    for i, text in enumerate(texts):
        if len(text) <= max_word or all(len(w) <= max_word for w in text.split()):
            out.append(text)
            continue
        for word in text.split():
            if len(word) > max_word:
                cut.append((len(word), i))
            out += [word[j : j + max_word] for j in range(0, len(word), max_word)]
    if cut:
        longest, where = max(cut)
        warnings.warn(
            f"texts hold {len(cut)} word(s) longer than {max_word:,} characters (the "
            f"longest: {longest:,}, in texts[{where}]): cut into {max_word:,}-character"
            " pieces for BPE training, whose time grows with the square of a word's "
            "length; encoding is not affected",
            stacklevel=3,
        )
    return out


def hf_from_json(text: object) -> Any:
    """A Hugging Face tokenizer from its JSON (``d['json']`` of a BPE tokenizer's
    ``to_dict()``); TypeError or ValueError (one line) for anything else."""
    from tokenizers import Tokenizer as HFTokenizer

    if not isinstance(text, str):
        raise TypeError(
            f"d['json'] must be a str of the tokenizer's JSON, got {type(text).__name__}"
        )
    try:
        json.loads(text)
    except ValueError as e:
        raise ValueError(f"d['json'] is not valid JSON: {e}") from None
    try:
        return HFTokenizer.from_str(text)
    except Exception as e:  # the library raises a bare Exception
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"d['json'] is not a tokenizer's JSON: {reason}") from None
