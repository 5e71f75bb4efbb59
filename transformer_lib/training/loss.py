"""Label-smoothed cross-entropy (§5.4, "Label Smoothing")."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from ..checks import check_float, check_int

Tensor = torch.Tensor


def _check_target(target: Tensor, vocab_size: int, ignore_index: Optional[int]) -> None:
    """target: an integer tensor of class ids in [0, vocab_size)."""
    if not isinstance(target, Tensor):
        raise TypeError(f"target must be a tensor of class ids, got {type(target).__name__}")
    if target.is_floating_point() or target.is_complex() or target.dtype == torch.bool:
        raise TypeError(
            f"target must hold integer class ids (torch.long), got dtype {target.dtype}"
        )
    if ignore_index is not None:
        check_int(ignore_index, "ignore_index", 0, vocab_size - 1)
    if target.numel():
        low, high = torch.stack(torch.aminmax(target)).tolist()  # one sync
        if low < 0 or high >= vocab_size:
            raise ValueError(
                f"target holds ids outside the vocabulary [0, {vocab_size}): min {low}, max {high}"
            )


def smoothed_targets(
    target: Tensor, vocab_size: int, epsilon: float = 0.1, ignore_index: Optional[int] = 0
) -> Tensor:
    """The target distribution q of label smoothing: (...) ids -> (..., V) probabilities.

    q puts ``1 - epsilon`` on the true token and spreads ``epsilon`` uniformly over the
    K allowed classes (the true one included): K = V - 1 with ``ignore_index`` (the
    padding class never receives mass), K = V without it. So

        q[k] = (1 - epsilon) * [k == y] + epsilon / K   for every allowed class k,
        q[ignore_index] = 0.

    Rows whose target is ``ignore_index`` are all zero (they are not part of the loss).
    """
    check_int(vocab_size, "vocab_size", 2)
    epsilon = check_float(epsilon, "epsilon", 0.0, 1.0, max_open=True)
    _check_target(target, vocab_size, ignore_index)
    K = vocab_size - (ignore_index is not None)
    q = torch.full((*target.shape, vocab_size), epsilon / K)  # (..., V)
    q = q.to(target.device)
    q.scatter_(-1, target.unsqueeze(-1), 1.0 - epsilon + epsilon / K)
    if ignore_index is not None:
        q[..., ignore_index] = 0.0
        q.masked_fill_((target == ignore_index).unsqueeze(-1), 0.0)
    return q


class LabelSmoothingLoss(nn.Module):
    """Cross-entropy against the label-smoothed targets of :func:`smoothed_targets` (§5.4).

    loss = mean over non-padding positions of  -sum_k q[k] * log softmax(logits)[k].

    The paper uses epsilon = 0.1: "this hurts perplexity, as the model learns to be more
    unsure, but improves accuracy and BLEU score". The minimum of this loss is the entropy
    of q, not zero. Without ``ignore_index`` it equals
    ``F.cross_entropy(logits, target, label_smoothing=epsilon)``, which spreads epsilon over
    all V classes; with it, padding targets are skipped and the padding class gets no mass.

    Shape:
        logits: (B, T, V) (any float dtype; computed in float32), target: (B, T) ids
        -> scalar.
    """

    def __init__(self, epsilon: float = 0.1, ignore_index: Optional[int] = 0):
        super().__init__()
        epsilon = check_float(epsilon, "epsilon", 0.0, 1.0, max_open=True)
        if ignore_index is not None:
            check_int(ignore_index, "ignore_index", 0)
        self.epsilon, self.ignore_index = epsilon, ignore_index

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        if not isinstance(logits, Tensor) or not logits.is_floating_point():
            got = logits.dtype if isinstance(logits, Tensor) else type(logits).__name__
            raise TypeError(f"logits must be a float tensor (B, T, V), got {got}")
        _check_target(target, logits.shape[-1], self.ignore_index)
        if logits.shape[:-1] != target.shape:
            raise ValueError(
                f"logits (B, T, V) and target (B, T) disagree: "
                f"{tuple(logits.shape)} vs {tuple(target.shape)}"
            )
        V = logits.shape[-1]
        log_p = logits.float().log_softmax(dim=-1).reshape(-1, V)  # (B*T, V)
        target = target.reshape(-1)  # (B*T,)
        eps, ignore = self.epsilon, self.ignore_index
        K = V - (ignore is not None)
        nll = -log_p.gather(1, target.unsqueeze(1)).squeeze(1)  # (B*T,)
        smooth = -log_p.sum(dim=1)  # (B*T,)
        if ignore is not None:
            smooth = smooth + log_p[:, ignore]  # the padding class gets no mass
        loss = (1.0 - eps) * nll + (eps / K) * smooth  # (B*T,)
        if ignore is None:
            return loss.mean()
        keep = target != ignore
        return loss[keep].sum() / keep.sum().clamp(min=1)
