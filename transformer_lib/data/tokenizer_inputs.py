"""The argument checks of the tokenizers (:mod:`.tokenizers`): training texts, one text to
encode, and the ids to decode (a list or a 1-D tensor, §3.4's integer token ids)."""

from __future__ import annotations

from typing import Any, Iterable, List


def check_texts(texts: Any) -> List[str]:
    if isinstance(texts, str) or not isinstance(texts, Iterable):
        raise TypeError(
            f"texts must be an iterable of str (not a single str), got {type(texts).__name__}"
        )
    texts = list(texts)
    bad = [type(t).__name__ for t in texts if not isinstance(t, str)]
    if bad:
        raise TypeError(f"texts must hold only str, found {bad[0]}")
    if not texts:
        raise ValueError("texts is empty: a tokenizer needs at least one training text")
    return texts


def check_text(text: Any) -> str:
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return text


def as_id_list(ids: Any) -> List[int]:
    if hasattr(ids, "tolist"):  # torch.Tensor / numpy array
        ids = ids.tolist()
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise TypeError(f"ids must be a sequence of int, got {type(ids).__name__}")
    ids = list(ids)
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise TypeError("ids must hold only int token ids (a 1-D sequence)")
    return ids
