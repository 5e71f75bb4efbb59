"""Tokenizers: text <-> token ids, with the same four special tokens at the same ids.

The model reads and writes integer ids (§3.4: "learned embeddings to convert the input
tokens and output tokens to vectors"). Two tokenizers share one interface, :class:`Tokenizer`:

- :class:`CharTokenizer`: one id per character; right for the date task;
- :class:`BPETokenizer`: byte-pair encoding (§5.1: "byte-pair encoding ... shared
  source-target vocabulary of about 37000 tokens"), trained with the Hugging Face
  ``tokenizers`` library.

Special ids, identical in both: ``PAD_ID = 0`` ``"<pad>"`` fills the rows of a batch,
``BOS_ID = 1`` ``"<s>"`` starts every decoder input, ``EOS_ID = 2`` ``"</s>"`` ends every
target, ``UNK_ID = 3`` ``"<unk>"`` stands for a character never seen in training.
``to_dict()`` holds only JSON-safe values, so a tokenizer can live inside a checkpoint read
with ``torch.load(weights_only=True)``; :func:`tokenizer_from_dict` rebuilds it.
"""
from __future__ import annotations

import json
from typing import Any, Iterable, List, Sequence

from .checks import check_int

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)  # index in this tuple == id


class Tokenizer:
    """The interface: ``vocab_size`` (also ``len(tok)``), ``encode``, ``decode``,
    ``id_to_token`` and ``to_dict``; the special ids are class attributes."""

    pad_id, bos_id, eos_id, unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID
    kind = "base"

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> List[int]:
        """``text`` -> ids, with ``<s>``/``</s>`` added on request."""
        raise NotImplementedError

    def decode(self, ids: Any, skip_special: bool = True) -> str:
        """ids (a list or 1-D tensor) -> text; special tokens left out unless asked."""
        raise NotImplementedError

    def id_to_token(self, i: int) -> str:
        raise NotImplementedError

    def to_dict(self) -> dict:
        raise NotImplementedError

    def __len__(self) -> int:
        return self.vocab_size

    def _wrap(self, ids: List[int], add_bos: bool, add_eos: bool) -> List[int]:
        return [BOS_ID] * bool(add_bos) + ids + [EOS_ID] * bool(add_eos)

    def _ids(self, ids: Any) -> List[int]:
        """``ids`` as a list of ints in the vocabulary."""
        ids = ids.tolist() if hasattr(ids, "tolist") else ids
        if isinstance(ids, (str, bytes)) or not isinstance(ids, (list, tuple)) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise TypeError("ids must be a 1-D sequence of int token ids")
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"ids holds {bad[0]}, outside the vocabulary [0, {self.vocab_size})")
        return list(ids)


def check_texts(texts: Any) -> List[str]:
    if isinstance(texts, str) or not isinstance(texts, Iterable):
        raise TypeError(f"texts must be an iterable of str (not one str), got "
                        f"{type(texts).__name__}")
    texts = list(texts)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise TypeError("texts must hold at least one text, and only str")
    return texts


def check_text(text: Any) -> str:
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return text


class CharTokenizer(Tokenizer):
    """One token per character; ids 0-3 are the specials, then the characters in sorted order."""

    kind = "char"

    def __init__(self, chars: Sequence[str]):
        chars = list(chars)
        if not all(isinstance(c, str) and len(c) == 1 for c in chars) or len(set(chars)) < len(
                chars):
            raise ValueError("chars must be distinct single-character strings")
        self.chars = chars
        self.itos = list(SPECIAL_TOKENS) + chars
        self.stoi = {c: i for i, c in enumerate(chars, start=len(SPECIAL_TOKENS))}

    @classmethod
    def train(cls, texts: Iterable[str]) -> "CharTokenizer":
        """The vocabulary is every character of ``texts``, sorted (deterministic)."""
        return cls(sorted(set("".join(check_texts(texts)))))

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> List[int]:
        return self._wrap([self.stoi.get(c, UNK_ID) for c in check_text(text)], add_bos, add_eos)

    def decode(self, ids: Any, skip_special: bool = True) -> str:
        keep = [i for i in self._ids(ids) if not (skip_special and i < len(SPECIAL_TOKENS))]
        return "".join(self.itos[i] for i in keep)

    def id_to_token(self, i: int) -> str:
        return self.itos[check_int(i, "i", 0, self.vocab_size - 1)]

    def to_dict(self) -> dict:
        return {"kind": self.kind, "chars": list(self.chars)}


class BPETokenizer(Tokenizer):
    """Byte-pair encoding on the Hugging Face ``tokenizers`` library (§5.1).

    Pre-tokenizer and decoder are ``Metaspace`` (spaces become ``"▁"``, as in
    SentencePiece), so decoding restores the spaces between words. Characters absent from
    the training texts map to ``<unk>``; text such as ``"<s>"`` is encoded as plain
    characters, never as the special token.
    """

    kind = "bpe"

    def __init__(self, hf_tokenizer: Any) -> None:
        from tokenizers import Tokenizer as HFTokenizer

        if not isinstance(hf_tokenizer, HFTokenizer):
            raise TypeError(f"hf_tokenizer must be a tokenizers.Tokenizer, got "
                            f"{type(hf_tokenizer).__name__}")
        if [hf_tokenizer.token_to_id(t) for t in SPECIAL_TOKENS] != [0, 1, 2, 3]:
            raise ValueError(f"hf_tokenizer must map {SPECIAL_TOKENS} to ids 0-3")
        hf_tokenizer.encode_special_tokens = True  # not serialised: set on every build
        self.hf = hf_tokenizer

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int = 8000,
              min_frequency: int = 2) -> "BPETokenizer":
        """Learn merges on ``texts`` until ``vocab_size`` tokens (specials included). Words
        (runs without a space) are cut to 1,000 characters for training: its time grows with
        the square of a word's length. Encoding is not affected."""
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import decoders, models, pre_tokenizers, trainers

        check_int(vocab_size, "vocab_size", len(SPECIAL_TOKENS) + 1)
        check_int(min_frequency, "min_frequency", 0)
        words = (w[i : i + 1000] for t in check_texts(texts) for w in t.split()
                 for i in range(0, len(w), 1000))
        hf = HFTokenizer(models.BPE(unk_token=UNK))
        hf.pre_tokenizer = pre_tokenizers.Metaspace()
        hf.decoder = decoders.Metaspace()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                      special_tokens=list(SPECIAL_TOKENS), show_progress=False)
        hf.train_from_iterator(words, trainer=trainer)
        return cls(hf)

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size()

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> List[int]:
        ids = self.hf.encode(check_text(text), add_special_tokens=False).ids
        return self._wrap(ids, add_bos, add_eos)

    def decode(self, ids: Any, skip_special: bool = True) -> str:
        return self.hf.decode(self._ids(ids), skip_special_tokens=skip_special)

    def id_to_token(self, i: int) -> str:
        return str(self.hf.id_to_token(check_int(i, "i", 0, self.vocab_size - 1)))

    def to_dict(self) -> dict:
        return {"kind": self.kind, "json": self.hf.to_str()}


def tokenizer_from_dict(d: Any) -> Tokenizer:
    """Rebuild a tokenizer from its ``to_dict()``."""
    if not isinstance(d, dict) or d.get("kind") not in ("char", "bpe"):
        raise ValueError("d must be a tokenizer's to_dict(): a dict with kind 'char' or 'bpe'")
    if d["kind"] == "char":
        if not isinstance(d.get("chars"), list):
            raise ValueError("d['chars'] must be the list of the tokenizer's characters")
        return CharTokenizer(d["chars"])
    from tokenizers import Tokenizer as HFTokenizer

    try:
        json.loads(d["json"])
        return BPETokenizer(HFTokenizer.from_str(d["json"]))
    except Exception as e:  # the library raises a bare Exception
        raise ValueError(f"d['json'] is not a BPE tokenizer's JSON ({type(e).__name__})") from None
