"""Tokenizers: text <-> token ids, with the same four special tokens at the same ids.

The model reads and writes integer ids (§3.4: "learned embeddings to convert the input
tokens and output tokens to vectors"). Two tokenizers share one interface:

- :class:`CharTokenizer`: one id per character; right for the date task.
- :class:`BPETokenizer`: byte-pair encoding (the paper's "byte-pair encoding ... shared
  source-target vocabulary of about 37000 tokens", §5.1), trained with the Hugging Face
  ``tokenizers`` library, never by hand.

Special ids, identical in both: ``PAD_ID = 0`` ``"<pad>"``, ``BOS_ID = 1`` ``"<s>"``,
``EOS_ID = 2`` ``"</s>"``, ``UNK_ID = 3`` ``"<unk>"``. A character never seen in training
becomes ``UNK_ID``. ``to_dict()`` holds only JSON-safe values, so a tokenizer can live inside
a checkpoint read with ``torch.load(weights_only=True)``; :func:`tokenizer_from_dict` rebuilds it.
"""
from __future__ import annotations

import json
import sys
import warnings
from typing import Iterable, List, Sequence

from ..checks import check_int

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)                # index in this tuple == id
MAX_WORD = 10_000          # BPE training: longer runs without a space are cut (time ~ length^2)
LONG_TRAINING = 50_000_000  # BPE training on more characters says what it does (~8x the Bible)


def _check_texts(texts) -> List[str]:
    if isinstance(texts, str) or not isinstance(texts, Iterable):
        raise TypeError(f"texts must be an iterable of str (not a single str), got "
                        f"{type(texts).__name__}")
    texts = list(texts)
    bad = [type(t).__name__ for t in texts if not isinstance(t, str)]
    if bad:
        raise TypeError(f"texts must hold only str, found {bad[0]}")
    if not texts:
        raise ValueError("texts is empty: a tokenizer needs at least one training text")
    return texts


def _check_text(text) -> str:
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return text


def _as_id_list(ids) -> List[int]:
    if hasattr(ids, "tolist"):                       # torch.Tensor / numpy array
        ids = ids.tolist()
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise TypeError(f"ids must be a sequence of int, got {type(ids).__name__}")
    ids = list(ids)
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise TypeError("ids must hold only int token ids (a 1-D sequence)")
    return ids


class Tokenizer:
    """The interface of every tokenizer: ``vocab_size``, ``encode``, ``decode``,
    ``id_to_token``, ``to_dict``, and the special ids, the same in all of them."""

    pad_id, bos_id, eos_id, unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID
    kind = "base"

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> List[int]:
        """``text`` -> ids, with ``<s>``/``</s>`` added on request."""
        raise NotImplementedError

    def decode(self, ids, skip_special: bool = True) -> str:
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

    def _check_id(self, i) -> int:
        if getattr(i, "ndim", None) == 0 and hasattr(i, "item"):      # a 0-d tensor or array
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
            raise ValueError(f"chars must be a sequence of single-character strings, got "
                             f"{bad[0]!r}")
        repeated = sorted({c for c in chars if chars.count(c) > 1})
        if repeated:
            raise ValueError(f"chars must not repeat a character, got {repeated[0]!r} twice")
        self.chars = chars
        self._itos = list(SPECIAL_TOKENS) + chars
        self._stoi = {c: i for i, c in enumerate(chars, start=len(SPECIAL_TOKENS))}

    @classmethod
    def train(cls, texts: Iterable[str]) -> "CharTokenizer":
        """The vocabulary is every character of ``texts``, sorted (deterministic)."""
        return cls(sorted(set("".join(_check_texts(texts)))))

    @property
    def vocab_size(self) -> int:
        return len(self._itos)

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> List[int]:
        ids = [self._stoi.get(c, UNK_ID) for c in _check_text(text)]
        return self._wrap(ids, add_bos, add_eos)

    def decode(self, ids, skip_special: bool = True) -> str:
        ids = _as_id_list(ids)
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

    def __init__(self, hf_tokenizer):
        from tokenizers import Tokenizer as HFTokenizer
        if not isinstance(hf_tokenizer, HFTokenizer):
            raise TypeError("hf_tokenizer must be a tokenizers.Tokenizer, got "
                            f"{type(hf_tokenizer).__name__}")
        for i, tok in enumerate(SPECIAL_TOKENS):
            if hf_tokenizer.token_to_id(tok) != i:
                raise ValueError(f"hf_tokenizer must map {tok!r} to id {i}")
        hf_tokenizer.encode_special_tokens = True    # not serialised: set on every build
        self.hf = hf_tokenizer

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int = 8000,
              min_frequency: int = 2) -> "BPETokenizer":
        """Learn merges on ``texts`` until ``vocab_size`` tokens (specials included).

        Training time grows with the square of the longest "word" (run without a space): a
        word longer than ``MAX_WORD`` characters is cut into pieces for training, with a
        warning. On more than ``LONG_TRAINING`` characters, a line on stderr says what is
        being trained, and the library's progress bars show how far it is.
        """
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import decoders, models, pre_tokenizers, trainers
        check_int(vocab_size, "vocab_size", len(SPECIAL_TOKENS) + 1)
        check_int(min_frequency, "min_frequency", 0)
        texts = _cut_long_words(_check_texts(texts))
        chars = sum(map(len, texts))
        if chars > LONG_TRAINING:
            print(f"training BPE: {vocab_size:,} tokens from {len(texts):,} texts "
                  f"({chars:,} characters); this can take minutes", file=sys.stderr, flush=True)
        hf = HFTokenizer(models.BPE(unk_token=UNK))
        hf.pre_tokenizer = pre_tokenizers.Metaspace()
        hf.decoder = decoders.Metaspace()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                      special_tokens=list(SPECIAL_TOKENS),
                                      show_progress=chars > LONG_TRAINING)
        hf.train_from_iterator(texts, trainer=trainer)
        return cls(hf)

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size()

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> List[int]:
        ids = self.hf.encode(_check_text(text), add_special_tokens=False).ids
        return self._wrap(ids, add_bos, add_eos)

    def decode(self, ids, skip_special: bool = True) -> str:
        ids = _as_id_list(ids)
        self._check_range(ids)
        return self.hf.decode(ids, skip_special_tokens=skip_special)

    def id_to_token(self, i: int) -> str:
        return self.hf.id_to_token(self._check_id(i))

    def to_dict(self) -> dict:
        return {"kind": self.kind, "json": self.hf.to_str()}


def _cut_long_words(texts: List[str]) -> List[str]:
    """``texts`` with every run of more than ``MAX_WORD`` non-space characters cut into
    pieces (separate training texts), and a warning saying how many and where."""
    out, cut = [], []
    for i, text in enumerate(texts):
        if len(text) <= MAX_WORD or all(len(w) <= MAX_WORD for w in text.split()):
            out.append(text)
            continue
        for word in text.split():
            if len(word) > MAX_WORD:
                cut.append((len(word), i))
            out += [word[j:j + MAX_WORD] for j in range(0, len(word), MAX_WORD)]
    if cut:
        longest, where = max(cut)
        warnings.warn(f"texts hold {len(cut)} word(s) longer than {MAX_WORD:,} characters (the "
                      f"longest: {longest:,}, in texts[{where}]): cut into {MAX_WORD:,}-character"
                      " pieces for BPE training, whose time grows with the square of a word's "
                      "length; encoding is not affected", stacklevel=3)
    return out


def tokenizer_from_dict(d: dict) -> Tokenizer:
    """Rebuild a tokenizer from its ``to_dict()`` (dispatch on ``d["kind"]``)."""
    if not isinstance(d, dict) or "kind" not in d:
        raise TypeError("d must be a dict made by a tokenizer's to_dict(), with a 'kind' key, "
                        f"got {type(d).__name__}" + (f" with keys {sorted(d)}" if isinstance(
                            d, dict) else ""))
    kinds = {CharTokenizer.kind: "chars", BPETokenizer.kind: "json"}
    if d["kind"] not in kinds:
        raise ValueError(f"d['kind'] must be 'char' or 'bpe', got {d['kind']!r}")
    key = kinds[d["kind"]]
    if key not in d:
        raise ValueError(f"d is a {d['kind']!r} tokenizer without its {key!r} key "
                         f"(keys: {sorted(d)})")
    if d["kind"] == CharTokenizer.kind:
        if isinstance(d["chars"], str) or not isinstance(d["chars"], (list, tuple)):
            raise TypeError(f"d['chars'] must be a list of characters, got "
                            f"{type(d['chars']).__name__}")
        return CharTokenizer(d["chars"])
    return BPETokenizer(_hf_from_json(d["json"]))


def _hf_from_json(text):
    """A Hugging Face tokenizer from its JSON; ValueError (one line) for anything else."""
    from tokenizers import Tokenizer as HFTokenizer
    if not isinstance(text, str):
        raise TypeError(f"d['json'] must be a str of the tokenizer's JSON, got "
                        f"{type(text).__name__}")
    try:
        json.loads(text)
    except ValueError as e:
        raise ValueError(f"d['json'] is not valid JSON: {e}") from None
    try:
        return HFTokenizer.from_str(text)
    except Exception as e:          # the library raises a bare Exception
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"d['json'] is not a tokenizer's JSON: {reason}") from None
