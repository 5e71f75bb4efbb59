"""Batches sized by tokens, grouped by length, padded per batch (§5.1).

The paper: "Sentence pairs were batched together by approximate sequence length. Each
training batch contained a set of sentence pairs containing approximately 25000 source
tokens and 25000 target tokens." Sorting by length before cutting batches keeps padding
small; padding only up to the longest example *of the batch* keeps tensors small.

The decoder is trained with teacher forcing: for a target ``y`` it reads
``tgt_in = <s> y`` and must predict ``tgt_out = y </s>``, one position ahead (§3.1).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import List, Optional, Sequence, Tuple, Union

import torch

from ..checks import check_bool, check_int
from .example_checks import (
    Example,
    check_example,
    check_examples,
    check_pairs,
    check_special_ids,
    id_list,
)
from .tokenizers import BOS_ID, EOS_ID, PAD_ID, Tokenizer


@dataclass
class Batch:
    """One training batch; padding (``pad_id``) only at the end of each row.

    Attributes:
        src: (B, S) long, source ids.
        tgt_in: (B, T) long, ``BOS + y``: what the decoder reads.
        tgt_out: (B, T) long, ``y + EOS``: what it must predict (the loss target).
        n_tokens: number of non-pad tokens in ``tgt_out`` (to average the loss).
        indices: position of each row in the ``examples`` the batch was cut from.
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    n_tokens: int
    indices: List[int] = field(default_factory=list)

    def to(self, device: Union[str, torch.device]) -> "Batch":
        """A copy with the tensors on ``device``."""
        return replace(
            self,
            src=self.src.to(device),
            tgt_in=self.tgt_in.to(device),
            tgt_out=self.tgt_out.to(device),
        )

    def __len__(self) -> int:
        return self.src.shape[0]


def fits(example: Example, max_len: int) -> bool:
    """The one length filter of the series: the source fits ``max_len`` positions, and so
    does the target with ``<s>`` in front (the decoder's input)."""
    src, tgt = example
    return len(src) <= max_len and len(tgt) + 1 <= max_len


def encode_fitting(
    pairs: Sequence[Tuple[str, str]], src_tok: Tokenizer, tgt_tok: Tokenizer, max_len: int
) -> Tuple[List[Tuple[str, str]], List[Example]]:
    """The ``(source, target)`` pairs that :func:`fits` ``max_len``, and their ids."""
    check_int(max_len, "max_len", 2)
    pairs = check_pairs(pairs)
    ids = [(src_tok.encode(s), tgt_tok.encode(t)) for s, t in pairs]
    keep = [i for i, p in enumerate(ids) if fits(p, max_len)]
    return [pairs[i] for i in keep], [ids[i] for i in keep]


def encode_pairs(
    pairs: Sequence[Tuple[str, str]],
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    max_len: Optional[int] = None,
) -> List[Example]:
    """Tokenize ``(source, target)`` strings into ``(src_ids, tgt_ids)``, no specials added.

    With ``max_len``, pairs that would not fit the model's positions are *dropped*: a
    source longer than ``max_len`` or a target longer than ``max_len - 1`` (``tgt_in``
    adds BOS).
    """
    if max_len is not None:
        check_int(max_len, "max_len", 2)
    examples = []
    for pair in check_pairs(pairs):
        src, tgt = src_tok.encode(pair[0]), tgt_tok.encode(pair[1])
        if max_len is None or fits((src, tgt), max_len):
            examples.append((src, tgt))
    return examples


def _cost(ex: Example) -> int:
    """Padded tokens one example needs per batch row: max(source length, target + 1)."""
    return max(len(ex[0]), len(ex[1]) + 1)


def _group(examples: List[Example], order: List[int], max_tokens: int) -> List[List[int]]:
    """Cut the length-sorted ``order`` into groups with rows * longest row <= max_tokens."""
    groups: List[List[int]] = []
    current: List[int] = []
    longest = 0
    for i in order:
        cost = _cost(examples[i])
        if current and (len(current) + 1) * max(longest, cost) > max_tokens:
            groups.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, cost)
    if current:
        groups.append(current)
    return groups


def pad_rows(rows: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> torch.Tensor:
    """Rows of ids of different lengths -> one (B, longest) ``torch.long`` tensor, padded
    at the right with ``pad_id``: the one padding function of the series."""
    check_int(pad_id, "pad_id", 0)
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
        raise TypeError(f"rows must be a list of lists of token ids, got {type(rows).__name__}")
    checked = [id_list(r, f"rows[{i}]") for i, r in enumerate(rows)]
    if not checked:
        raise ValueError("rows is empty: nothing to pad")
    return _padded(checked, pad_id)


def _padded(rows: List[List[int]], pad_id: int) -> torch.Tensor:
    """:func:`pad_rows` of rows already checked."""
    width = max(len(r) for r in rows)
    return torch.tensor([r + [pad_id] * (width - len(r)) for r in rows], dtype=torch.long)


def make_batch(
    examples: Sequence[Example],
    indices: List[int],
    pad_id: int = PAD_ID,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
) -> Batch:
    """Pad the chosen examples into one :class:`Batch`."""
    check_special_ids(pad_id, bos_id, eos_id)
    if not hasattr(examples, "__getitem__") or isinstance(examples, (str, bytes)):
        raise TypeError(
            f"examples must be a list of (src_ids, tgt_ids) pairs, got {type(examples).__name__}"
        )
    if isinstance(indices, (str, bytes)) or not hasattr(indices, "__iter__"):
        raise TypeError(
            f"indices must be a list of positions in examples, got {type(indices).__name__}"
        )
    indices = [check_int(i, f"indices[{k}]", 0, len(examples) - 1) for k, i in enumerate(indices)]
    if not indices:
        raise ValueError("indices is empty: a batch needs at least one example")
    chosen = [check_example(examples[i], i) for i in indices]
    return _batch(chosen, indices, pad_id, bos_id, eos_id)


def _batch(
    chosen: List[Example], indices: List[int], pad_id: int, bos_id: int, eos_id: int
) -> Batch:
    """:func:`make_batch` of examples already checked (``chosen[k]`` is
    ``examples[indices[k]]``)."""
    src = _padded([s for s, _ in chosen], pad_id)  # (B, S)
    tgt_in = _padded([[bos_id] + t for _, t in chosen], pad_id)  # (B, T)
    tgt_out = _padded([t + [eos_id] for _, t in chosen], pad_id)  # (B, T)
    n_tokens = sum(len(t) + 1 for _, t in chosen)
    return Batch(src, tgt_in, tgt_out, n_tokens, list(indices))


def token_batches(
    examples: Sequence[Example],
    max_tokens: int,
    shuffle: bool = True,
    seed: int = 0,
    pad_id: int = PAD_ID,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
) -> List[Batch]:
    """All ``examples`` in batches of at most ``max_tokens`` padded tokens, each once.

    Examples are sorted by (source, target) length and cut into batches whose padded
    source and padded target each hold at most ``max_tokens`` tokens (B * S and B * T).
    With ``shuffle``, ties in length are broken at random and the batch order is shuffled,
    both by ``random.Random(seed)``: pass ``seed + epoch`` for a new order every epoch.
    """
    check_int(max_tokens, "max_tokens", 1)
    check_int(seed, "seed")
    check_bool(shuffle, "shuffle")
    check_special_ids(pad_id, bos_id, eos_id)
    examples = check_examples(examples)
    if not examples:
        return []
    longest = max(range(len(examples)), key=lambda i: _cost(examples[i]))
    if _cost(examples[longest]) > max_tokens:
        raise ValueError(
            f"max_tokens={max_tokens} is smaller than examples[{longest}], which "
            f"needs {_cost(examples[longest])} tokens; raise max_tokens or drop "
            "long pairs with encode_pairs(..., max_len=...)"
        )
    rng = random.Random(seed)
    order = list(range(len(examples)))
    if shuffle:
        rng.shuffle(order)
    order.sort(key=lambda i: (len(examples[i][0]), len(examples[i][1])))  # stable
    groups = _group(examples, order, max_tokens)
    if shuffle:
        rng.shuffle(groups)
    # the examples were checked above, once: each batch is only padded
    return [_batch([examples[i] for i in g], g, pad_id, bos_id, eos_id) for g in groups]
