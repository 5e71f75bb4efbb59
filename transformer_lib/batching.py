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
from typing import Any, List, Sequence, Tuple

import torch

from .checks import check_bool, check_int
from .tokenizers import BOS_ID, EOS_ID, PAD_ID, Tokenizer

Example = Tuple[List[int], List[int]]  # (source ids, target ids), no special tokens


@dataclass
class Batch:
    """One training batch; padding (``pad_id``) only at the end of each row.

    Attributes:
        src: (B, S) source ids. tgt_in: (B, T) ``<s> y``, what the decoder reads.
        tgt_out: (B, T) ``y </s>``, what it must predict. n_tokens: the non-pad tokens of
        ``tgt_out``. indices: each row's position in the examples it was cut from.
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    n_tokens: int
    indices: List[int] = field(default_factory=list)

    def to(self, device: Any) -> "Batch":
        """A copy with the tensors on ``device``."""
        return replace(self, src=self.src.to(device), tgt_in=self.tgt_in.to(device),
                       tgt_out=self.tgt_out.to(device))

    def __len__(self) -> int:
        return self.src.shape[0]


def fits(example: Example, max_len: int) -> bool:
    """The one length filter of the series: the source fits ``max_len`` positions, and so
    does the target with ``<s>`` in front (the decoder's input)."""
    return len(example[0]) <= max_len and len(example[1]) + 1 <= max_len


def check_pairs(pairs: Any) -> List[Tuple[str, str]]:
    if isinstance(pairs, (str, bytes)) or not hasattr(pairs, "__iter__"):
        raise TypeError(f"pairs must be a list of (source, target) str pairs, got "
                        f"{type(pairs).__name__}")
    pairs = list(pairs)
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2
                and all(isinstance(x, str) for x in pair)):
            raise TypeError(f"pairs[{i}] must be a (source, target) pair of str, got {pair!r:.80}")
    return pairs


def encode_pairs(pairs: Sequence[Tuple[str, str]], tokenizer: Tokenizer,
                 max_len: int | None = None) -> List[Example]:
    """Tokenize ``(source, target)`` strings into ``(src_ids, tgt_ids)``, no specials added;
    with ``max_len``, the pairs that do not :func:`fits` are left out."""
    if max_len is not None:
        check_int(max_len, "max_len", 2)
    examples = [(tokenizer.encode(s), tokenizer.encode(t)) for s, t in check_pairs(pairs)]
    return [ex for ex in examples if max_len is None or fits(ex, max_len)]


def check_examples(examples: Any) -> List[Example]:
    """``examples`` as a list of (src_ids, tgt_ids) lists of ints >= 0, the source not empty."""
    if isinstance(examples, (str, bytes, torch.Tensor)) or not hasattr(examples, "__iter__"):
        raise TypeError(f"examples must be a list of (src_ids, tgt_ids) pairs, got "
                        f"{type(examples).__name__}")
    out = []
    for i, ex in enumerate(examples):
        if not (isinstance(ex, (tuple, list)) and len(ex) == 2 and all(
                isinstance(ids, (list, tuple)) and set(map(type, ids)) <= {int} for ids in ex)):
            raise TypeError(f"examples[{i}] must be a (src_ids, tgt_ids) pair of int lists, "
                            f"got {ex!r:.80}")
        if not ex[0] or min(ex[0]) < 0 or (ex[1] and min(ex[1]) < 0):
            raise ValueError(f"examples[{i}] must have a source and only ids >= 0, got {ex!r:.80}")
        out.append((list(ex[0]), list(ex[1])))
    return out


def pad_rows(rows: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> torch.Tensor:
    """Rows of ids of different lengths -> one (B, longest) ``torch.long`` tensor, padded
    at the right with ``pad_id``: the one padding function of the series."""
    check_int(pad_id, "pad_id", 0)
    lists = [list(r) for r in rows]
    if not lists:
        raise ValueError("rows is empty: nothing to pad")
    width = max(len(r) for r in lists)
    return torch.tensor([r + [pad_id] * (width - len(r)) for r in lists], dtype=torch.long)


def make_batch(examples: Sequence[Example], pad_id: int = PAD_ID, bos_id: int = BOS_ID,
               eos_id: int = EOS_ID) -> Batch:
    """Pad ``examples`` into one :class:`Batch`: ``tgt_in = <s> y``, ``tgt_out = y </s>``."""
    src = pad_rows([s for s, _ in examples], pad_id)                         # (B, S)
    tgt_in = pad_rows([[bos_id] + t for _, t in examples], pad_id)           # (B, T)
    tgt_out = pad_rows([t + [eos_id] for _, t in examples], pad_id)          # (B, T)
    return Batch(src, tgt_in, tgt_out, sum(len(t) + 1 for _, t in examples))


def token_batches(examples: Sequence[Example], max_tokens: int, shuffle: bool = True,
                  seed: int = 0, pad_id: int = PAD_ID) -> List[Batch]:
    """All ``examples`` in batches of at most ``max_tokens`` padded tokens, each once.

    Examples are sorted by (source, target) length and cut into batches whose padded
    source and padded target each hold at most ``max_tokens`` tokens (B * S and B * T).
    With ``shuffle``, ties in length are broken at random and the batch order is shuffled,
    both by ``random.Random(seed)``: pass ``seed + epoch`` for a new order every epoch.
    """
    check_int(max_tokens, "max_tokens", 1)
    check_int(seed, "seed")
    check_bool(shuffle, "shuffle")
    examples = check_examples(examples)
    cost = [max(len(s), len(t) + 1) for s, t in examples]   # a row's tokens: max(S, T)
    if examples and max(cost) > max_tokens:
        i = cost.index(max(cost))
        raise ValueError(f"max_tokens={max_tokens} is below the {cost[i]} tokens examples[{i}] "
                         "needs: raise max_tokens or leave out long pairs (encode_pairs max_len)")
    rng = random.Random(seed)
    order = list(range(len(examples)))
    if shuffle:
        rng.shuffle(order)
    order.sort(key=lambda i: (len(examples[i][0]), len(examples[i][1])))  # stable
    groups: List[List[int]] = []
    longest = 0
    for i in order:                              # cut where rows * longest row would overflow
        if groups and (len(groups[-1]) + 1) * max(longest, cost[i]) <= max_tokens:
            groups[-1].append(i)
            longest = max(longest, cost[i])
        else:
            groups.append([i])
            longest = cost[i]
    if shuffle:
        rng.shuffle(groups)
    batches = []
    for g in groups:
        batch = make_batch([examples[i] for i in g], pad_id)
        batch.indices = g
        batches.append(batch)
    return batches
