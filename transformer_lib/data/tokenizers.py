"""Tokenizers: text <-> token ids, with the same four special tokens at the same ids.

The model reads and writes integer ids (§3.4: "learned embeddings to convert the input
tokens and output tokens to vectors"). Two tokenizers share one interface:

- :class:`Tokenizer`: the interface, the type of every ``tok``, ``src_tok`` and ``tgt_tok``
  of the package;
- :class:`CharTokenizer`: one id per character; right for the date task.
- :class:`BPETokenizer`: byte-pair encoding (the paper's "byte-pair encoding ... shared
  source-target vocabulary of about 37000 tokens", §5.1), trained with the Hugging Face
  ``tokenizers`` library, never by hand (:mod:`.hf_bpe`).

Special ids, identical in both (:mod:`.special_tokens`): ``PAD_ID = 0`` ``"<pad>"``,
``BOS_ID = 1`` ``"<s>"``, ``EOS_ID = 2`` ``"</s>"``, ``UNK_ID = 3`` ``"<unk>"``. A character
never seen in training becomes ``UNK_ID``. ``to_dict()`` holds only JSON-safe values, so a
tokenizer can live inside a checkpoint read with ``torch.load(weights_only=True)``;
:func:`tokenizer_from_dict` rebuilds it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Iterable, List, Sequence, Union

from ..checks import check_int
from .hf_bpe import cut_long_words, hf_from_json, train_bpe
from .special_tokens import BOS, BOS_ID, EOS, EOS_ID, PAD, PAD_ID, SPECIAL_TOKENS, UNK, UNK_ID
from .tokenizer_inputs import as_id_list, check_text, check_texts

if TYPE_CHECKING:
    import torch

__all__ = [
    "PAD",
    "BOS",
    "EOS",
    "UNK",
    "PAD_ID",
    "BOS_ID",
    "EOS_ID",
    "UNK_ID",
    "SPECIAL_TOKENS",
    "Tokenizer",
    "CharTokenizer",
    "BPETokenizer",
    "tokenizer_from_dict",
    "Ids",
]

Ids = Union[Sequence[int], "torch.Tensor"]  # token ids: a list, or a 1-D integer tensor
MAX_WORD = 10_000  # BPE training: longer runs without a space are cut (time ~ length^2)
LONG_TRAINING = 50_000_000  # BPE training on more characters says what it does (~8x the Bible)


class Tokenizer:
    """The interface of every tokenizer, and the type of ``tok``/``src_tok``/``tgt_tok``.

    A tokenizer has a ``vocab_size`` (also ``len(tok)``), turns text into ids (``encode``)
    and back (``decode``), names one id (``id_to_token``) and describes itself in JSON-safe
    values (``to_dict``, with a ``kind`` that :func:`tokenizer_from_dict` dispatches on).
    The special ids are class attributes, the same in every tokenizer. A new tokenizer
    subclasses this class and implements the five members that raise
    ``NotImplementedError`` here.
    """

    pad_id, bos_id, eos_id, unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID
    kind = "base"

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> List[int]:
        """``text`` -> ids, with ``<s>``/``</s>`` added on request."""
        raise NotImplementedError

    def decode(self, ids: Ids, skip_special: bool = True) -> str:
        """ids (list or 1-D tensor) -> text; special tokens left out unless asked."""
        raise NotImplementedError

    def id_to_token(self, i: int) -> str:
        raise NotImplementedError

    def to_dict(self) -> dict:
        """JSON-safe values that :func:`tokenizer_from_dict` turns back into the tokenizer."""
        raise NotImplementedError

    def __len__(self) -> int:
        return self.vocab_size

    def _wrap(self, ids: List[int], add_bos: bool, add_eos: bool) -> List[int]:
        return [BOS_ID] * bool(add_bos) + ids + [EOS_ID] * bool(add_eos)

    def _check_id(self, i: Any) -> int:
        if getattr(i, "ndim", None) == 0 and hasattr(i, "item"):  # a 0-d tensor or array
            i = i.item()
        return check_int(i, "i", 0, self.vocab_size - 1)

    def _check_range(self, ids: List[int]) -> None:
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"ids holds {bad[0]}, outside the vocabulary [0, {self.vocab_size})")


class CharTokenizer(Tokenizer):
    """One token per character; ids 0-3 are the specials, then the characters in sorted order."""

    kind = "char"

    def __init__(self, chars: Sequence[str]):
        chars = list(chars)
        bad = [c for c in chars if not (isinstance(c, str) and len(c) == 1)]
        if bad:
            raise ValueError(
                f"chars must be a sequence of single-character strings, got {bad[0]!r}"
            )
        repeated = sorted({c for c in chars if chars.count(c) > 1})
        if repeated:
            raise ValueError(f"chars must not repeat a character, got {repeated[0]!r} twice")
        self.chars = chars
        self._itos = list(SPECIAL_TOKENS) + chars
        self._stoi = {c: i for i, c in enumerate(chars, start=len(SPECIAL_TOKENS))}

    @classmethod
    def train(cls, texts: Iterable[str]) -> "CharTokenizer":
        """The vocabulary is every character of ``texts``, sorted (deterministic)."""
        return cls(sorted(set("".join(check_texts(texts)))))

    @property
    def vocab_size(self) -> int:
        return len(self._itos)

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> List[int]:
        ids = [self._stoi.get(c, UNK_ID) for c in check_text(text)]
        return self._wrap(ids, add_bos, add_eos)

    def decode(self, ids: Ids, skip_special: bool = True) -> str:
        ids = as_id_list(ids)
        self._check_range(ids)
        keep = [i for i in ids if not (skip_special and i < len(SPECIAL_TOKENS))]
        return "".join(self._itos[i] for i in keep)

    def id_to_token(self, i: int) -> str:
        return self._itos[self._check_id(i)]

    def to_dict(self) -> dict:
        return {"kind": self.kind, "chars": list(self.chars)}


class BPETokenizer(Tokenizer):
    """Byte-pair encoding on the Hugging Face ``tokenizers`` library (§5.1).

    Pre-tokenizer and decoder are ``Metaspace`` (spaces become ``"▁"``, as in
    SentencePiece), so decoding restores the spaces between words. Characters absent from
    the training texts map to ``<unk>``. Text such as ``"<s>"`` in the input is encoded as
    plain characters, never as the special token.
    """

    kind = "bpe"

    def __init__(self, hf_tokenizer: Any) -> None:
        from tokenizers import Tokenizer as HFTokenizer

        if not isinstance(hf_tokenizer, HFTokenizer):
            raise TypeError(
                f"hf_tokenizer must be a tokenizers.Tokenizer, got {type(hf_tokenizer).__name__}"
            )
        for i, tok in enumerate(SPECIAL_TOKENS):
            if hf_tokenizer.token_to_id(tok) != i:
                raise ValueError(f"hf_tokenizer must map {tok!r} to id {i}")
        hf_tokenizer.encode_special_tokens = True  # not serialised: set on every build
        self.hf = hf_tokenizer

    @classmethod
    def train(
        cls, texts: Iterable[str], vocab_size: int = 8000, min_frequency: int = 2
    ) -> "BPETokenizer":
        """Learn merges on ``texts`` until ``vocab_size`` tokens (specials included).

        Training time grows with the square of the longest "word" (run without a space): a
        word longer than ``MAX_WORD`` characters is cut into pieces for training, with a
        warning. On more than ``LONG_TRAINING`` characters, a line on stderr says what is
        being trained, and the library's progress bars show how far it is.
        """
        check_int(vocab_size, "vocab_size", len(SPECIAL_TOKENS) + 1)
        check_int(min_frequency, "min_frequency", 0)
        texts = cut_long_words(check_texts(texts), MAX_WORD)
        chars = sum(map(len, texts))
        if chars > LONG_TRAINING:
            print(
                f"training BPE: {vocab_size:,} tokens from {len(texts):,} texts "
                f"({chars:,} characters); this can take minutes",
                file=sys.stderr,
                flush=True,
            )
        hf = train_bpe(texts, vocab_size, min_frequency, show_progress=chars > LONG_TRAINING)
        return cls(hf)

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size()

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> List[int]:
        ids = self.hf.encode(check_text(text), add_special_tokens=False).ids
        return self._wrap(ids, add_bos, add_eos)

    def decode(self, ids: Ids, skip_special: bool = True) -> str:
        ids = as_id_list(ids)
        self._check_range(ids)
        return self.hf.decode(ids, skip_special_tokens=skip_special)

    def id_to_token(self, i: int) -> str:
        token = self.hf.id_to_token(self._check_id(i))
        if token is None:  # a gap in a hand-made vocabulary's ids
            raise ValueError(f"i={i} has no token in this vocabulary")
        return token

    def to_dict(self) -> dict:
        return {"kind": self.kind, "json": self.hf.to_str()}


def tokenizer_from_dict(d: dict) -> Tokenizer:
    """Rebuild a tokenizer from its ``to_dict()`` (dispatch on ``d["kind"]``)."""
    if not isinstance(d, dict) or "kind" not in d:
        raise TypeError(
            "d must be a dict made by a tokenizer's to_dict(), with a 'kind' key, "
            f"got {type(d).__name__}" + (f" with keys {sorted(d)}" if isinstance(d, dict) else "")
        )
    kinds = {CharTokenizer.kind: "chars", BPETokenizer.kind: "json"}
    if d["kind"] not in kinds:
        raise ValueError(f"d['kind'] must be 'char' or 'bpe', got {d['kind']!r}")
    key = kinds[d["kind"]]
    if key not in d:
        raise ValueError(
            f"d is a {d['kind']!r} tokenizer without its {key!r} key (keys: {sorted(d)})"
        )
    if d["kind"] == CharTokenizer.kind:
        if isinstance(d["chars"], str) or not isinstance(d["chars"], (list, tuple)):
            raise TypeError(
                f"d['chars'] must be a list of characters, got {type(d['chars']).__name__}"
            )
        return CharTokenizer(d["chars"])
    return BPETokenizer(hf_from_json(d["json"]))
