"""What a checkpoint may hold and its checksum (see :mod:`.checkpoint`).

:func:`check_loadable` refuses, naming the key, a value that ``torch.load(weights_only=True)``
could not read back; :func:`checksum` hashes every value of a state, tensors and the rest.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any, Dict, Iterator, Tuple

import torch

# the types torch.load(weights_only=True) reads back (exact types: a numpy float is refused)
_SAFE_LEAVES = (
    str,
    bytes,
    int,
    float,
    complex,
    bool,
    type(None),
    torch.dtype,
    torch.Size,
    torch.device,
)
_SAFE_CONTAINERS = (dict, OrderedDict, list, tuple, set)


def check_loadable(value: Any, name: str) -> None:
    """Raise ``TypeError`` naming the key (``name['extra']['data_dir']``) unless every value
    in ``value`` is one the safe loader (``weights_only=True``) reads back: a tensor, str,
    bytes, int, float, bool, None, dtype, or a dict, list or tuple of them."""
    if isinstance(value, torch.Tensor) or type(value) in _SAFE_LEAVES:
        return
    if type(value) in _SAFE_CONTAINERS:
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for k, v in items:
            if isinstance(value, dict):
                check_loadable(k, f"a key of {name}")
            check_loadable(v, f"{name}[{k!r}]")
        return
    kind = type(value)
    raise TypeError(
        f"{name} is a {kind.__module__}.{kind.__qualname__} ({value!r:.60}), which "
        "torch.load(weights_only=True) cannot read back, so the checkpoint could "
        "never be loaded: store a str, int, float, bool, None, tensor, or a list or "
        "dict of them (e.g. str(path), float(x))"
    )


def checksum(state: Dict[str, Any]) -> str:
    """SHA-256 over every value of ``state`` (except a stored checksum), in a fixed order:
    a tensor's key path, dtype, shape and bytes; any other value's key path, type and repr."""
    h = hashlib.sha256()
    for key, value in _leaves({k: v for k, v in state.items() if k != "checksum"}):
        if isinstance(value, torch.Tensor):
            _hash_tensor(h, key, value)
        else:
            h.update(f"{key}|{type(value).__name__}|{value!r}\n".encode())
    return "sha256-all:" + h.hexdigest()


def tensor_checksum(state: Dict[str, Any]) -> str:
    """The checksum of files written before values were covered: the tensors only."""
    h = hashlib.sha256()
    for key, t in _tensors({k: v for k, v in state.items() if k != "checksum"}):
        _hash_tensor(h, key, t)
    return "sha256:" + h.hexdigest()


def _hash_tensor(h, key: str, t: torch.Tensor) -> None:
    t = t.detach().cpu().contiguous()
    h.update(f"{key}|{t.dtype}|{tuple(t.shape)}|".encode())
    h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())


def _leaves(value, key: str = "") -> Iterator[Tuple[str, Any]]:
    if isinstance(value, dict):
        for k in sorted(value, key=repr):
            yield from _leaves(value[k], f"{key}/{k!r}")
    elif isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
        yield key, f"<{type(value).__name__} of {len(value)}>"
        for i, v in enumerate(value):
            yield from _leaves(v, f"{key}/{i}")
    elif isinstance(value, set):
        yield key, sorted(repr(v) for v in value)
    else:
        yield key, value


def _tensors(value, key: str = "") -> Iterator[Tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        yield key, value
    elif isinstance(value, dict):
        for k in sorted(value, key=str):
            yield from _tensors(value[k], f"{key}/{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _tensors(v, f"{key}/{i}")
