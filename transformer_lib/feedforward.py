"""Position-wise feed-forward network (§3.3, Eq. 2)."""
from __future__ import annotations

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from . import cpu_kernels
from .dropout import Dropout, _compiled_arguments


class _CompiledFeedForward(torch.autograd.Function):
    """FFN(x) for training on the CPU with the compiled kernel (see ``cpu_kernels``).

    The same network as the module's plain path, with two passes over the (B, L, d_ff)
    hidden layer fewer: its bias, ReLU and dropout are added in one pass, in place on the
    product x W_1^T; and the backward pass, written out below (the textbook backward of a
    two-layer network), applies the ReLU and dropout to the gradient in place, on a buffer
    it has just made itself. Only x and the hidden output are kept for it.
    """

    @staticmethod
    def forward(ctx, x, w_1, b_1, w_2, b_2, p):
        x2 = x.reshape(-1, x.shape[-1])                                      # (B*L, D)
        threshold, scale, key = _compiled_arguments(p)
        hidden = cpu_kernels.load().bias_relu_dropout_(                       # (B*L, d_ff)
            x2 @ w_1.t(), b_1, threshold, scale, key)        # Dropout(ReLU(x W_1^T + b_1))
        out = torch.addmm(b_2, hidden, w_2.t())                              # (B*L, D)
        ctx.save_for_backward(x2, w_1, w_2, hidden)
        ctx.scale, ctx.x_shape = scale, x.shape
        return out.view(*x.shape[:-1], out.shape[-1])

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x2, w_1, w_2, hidden = ctx.saved_tensors
        need = ctx.needs_input_grad
        g = grad.reshape(-1, grad.shape[-1])                                 # (B*L, D)
        grad_w_2 = g.t() @ hidden if need[3] else None
        grad_b_2 = g.sum(0) if need[4] else None
        # through W_2, then ReLU + dropout: the scale where the output is positive, else 0
        g = cpu_kernels.load().relu_dropout_backward_(g @ w_2, hidden, ctx.scale)
        grad_w_1 = g.t() @ x2 if need[1] else None
        grad_b_1 = g.sum(0) if need[2] else None
        grad_x = (g @ w_1).view(ctx.x_shape) if need[0] else None
        return grad_x, grad_w_1, grad_b_1, grad_w_2, grad_b_2, None


def _compiled(ffn: "PositionwiseFeedForward", x: torch.Tensor) -> bool:
    """Whether ``ffn`` runs ``x`` through :class:`_CompiledFeedForward`: the compiled kernel
    switched on for its dropout, and no autocast (that case keeps the plain path)."""
    return (ffn.dropout.compiled_for(x) and x.dtype == ffn.w_1.weight.dtype
            and not torch.is_autocast_enabled("cpu"))


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to each position alike (§3.3).

    Dropout sits between the two layers, as in ``nn.TransformerEncoderLayer``.

    Shape:
        x: (B, L, D) -> (B, L, D), through (B, L, d_ff)
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _compiled(self, x):                          # opt-in CPU kernel: the same network
            return _CompiledFeedForward.apply(x, self.w_1.weight, self.w_1.bias,
                                              self.w_2.weight, self.w_2.bias, self.dropout.p)
        hidden = self.dropout.of_relu(self.w_1(x))      # Dropout(ReLU(x W_1 + b_1)), (B, L, d_ff)
        return self.w_2(hidden)                                              # (B, L, D)
