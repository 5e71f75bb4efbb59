"""The argument checks of the batching functions (:mod:`.batching`): sentence pairs of str,
examples as (source ids, target ids) pairs of token ids (§3.4's integer tokens), and the
special ids that pad and frame a batch (§5.1)."""

from __future__ import annotations

from typing import List, Tuple

import torch

from ..checks import check_int

Example = Tuple[List[int], List[int]]  # (source ids, target ids without specials)


def check_pairs(pairs) -> List[Tuple[str, str]]:
    """``pairs`` as a list of (source, target) pairs of str."""
    if isinstance(pairs, (str, bytes)) or not hasattr(pairs, "__iter__"):
        raise TypeError(
            f"pairs must be a list of (source, target) pairs of str, got {type(pairs).__name__}"
        )
    pairs = list(pairs)
    for i, pair in enumerate(pairs):
        if not (
            isinstance(pair, (tuple, list))
            and len(pair) == 2
            and all(isinstance(x, str) for x in pair)
        ):
            raise TypeError(f"pairs[{i}] must be a (source, target) pair of str, got {pair!r:.80}")
    return pairs


def check_examples(examples) -> List[Example]:
    """``examples`` as a list of (src_ids, tgt_ids) lists of non-negative ints."""
    if isinstance(examples, (str, bytes, torch.Tensor)) or not hasattr(examples, "__iter__"):
        raise TypeError(
            f"examples must be a list of (src_ids, tgt_ids) pairs, got {type(examples).__name__}"
        )
    return [check_example(ex, i) for i, ex in enumerate(examples)]


def check_example(ex, i: int) -> Example:
    if not (isinstance(ex, (tuple, list)) and len(ex) == 2):
        raise TypeError(f"examples[{i}] must be a (src_ids, tgt_ids) pair, got {ex!r:.80}")
    src, tgt = (id_list(ids, f"examples[{i}][{j}]") for j, ids in enumerate(ex))
    if not src:
        raise ValueError(f"examples[{i}] has an empty source")
    return src, tgt


def id_list(ids, name: str) -> List[int]:
    """A sequence of token ids (list, tuple, 1-D tensor or array) as a list of ints >= 0."""
    if hasattr(ids, "tolist") and getattr(ids, "ndim", 1) == 1:
        ids = ids.tolist()
    if not isinstance(ids, (list, tuple)):
        raise TypeError(
            f"{name} must be a list of token ids (int), got {type(ids).__name__} {ids!r:.40}"
        )
    if set(map(type, ids)) <= {int}:  # plain ints, the usual case: checked without a loop here
        ids = list(ids)
        if ids and min(ids) < 0:
            raise ValueError(f"{name} must hold token ids (int >= 0), got {min(ids)}")
        return ids
    bad = [i for i in ids if isinstance(i, bool) or not hasattr(i, "__index__")]
    if bad:
        raise TypeError(
            f"{name} must hold token ids (int >= 0), got {bad[0]!r} ({type(bad[0]).__name__})"
        )
    ids = [int(i) for i in ids]
    if ids and min(ids) < 0:
        raise ValueError(f"{name} must hold token ids (int >= 0), got {min(ids)}")
    return ids


def check_special_ids(pad_id, bos_id, eos_id) -> None:
    for name, value in (("pad_id", pad_id), ("bos_id", bos_id), ("eos_id", eos_id)):
        check_int(value, name, 0)
