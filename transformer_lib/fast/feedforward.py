"""The position-wise feed-forward network (§3.3) for CPU training: the same network as
:class:`transformer_lib.feedforward.PositionwiseFeedForward`, fewer passes over memory."""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from ..feedforward import PositionwiseFeedForward
from . import kernels as cpu_kernels
from .dropout import compiled_arguments, cheap_mask_applies, relu_dropout


class _CompiledFeedForward(torch.autograd.Function):
    """FFN(x) for training on the CPU with the compiled kernel.

    Two passes over the (B, L, d_ff) hidden layer fewer than the plain network: its bias,
    ReLU and dropout are added in one pass, in place on the product x W_1^T; and the
    backward pass, written out below (the textbook backward of a two-layer network),
    applies the ReLU and dropout to the gradient in place, on a buffer it has just made
    itself. Only x and the hidden output are kept for it.
    """

    @staticmethod
    def forward(ctx, x, w_1, b_1, w_2, b_2, p):
        x2 = x.reshape(-1, x.shape[-1])  # (B*L, D)
        threshold, scale, key = compiled_arguments(p)
        hidden = cpu_kernels.load().bias_relu_dropout_(  # (B*L, d_ff)
            x2 @ w_1.t(), b_1, threshold, scale, key
        )  # Dropout(ReLU(x W_1^T + b_1))
        out = torch.addmm(b_2, hidden, w_2.t())  # (B*L, D)
        ctx.save_for_backward(x2, w_1, w_2, hidden)
        ctx.scale, ctx.x_shape = scale, x.shape
        return out.view(*x.shape[:-1], out.shape[-1])

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x2, w_1, w_2, hidden = ctx.saved_tensors
        need = ctx.needs_input_grad
        g = grad.reshape(-1, grad.shape[-1])  # (B*L, D)
        grad_w_2 = g.t() @ hidden if need[3] else None
        grad_b_2 = g.sum(0) if need[4] else None
        # through W_2, then ReLU + dropout: the scale where the output is positive, else 0
        g = cpu_kernels.load().relu_dropout_backward_(g @ w_2, hidden, ctx.scale)
        grad_w_1 = g.t() @ x2 if need[1] else None
        grad_b_1 = g.sum(0) if need[2] else None
        grad_x = (g @ w_1).view(ctx.x_shape) if need[0] else None
        return grad_x, grad_w_1, grad_b_1, grad_w_2, grad_b_2, None


class FastFeedForward(PositionwiseFeedForward):
    """:class:`PositionwiseFeedForward` with its CPU training step sped up.

    * ``kernels``: the whole network as one autograd function with the compiled kernel
      (:class:`_CompiledFeedForward`), except under autocast;
    * otherwise ReLU and dropout as one function that keeps no mask
      (:func:`transformer_lib.fast.dropout.relu_dropout`).

    Anywhere else (evaluation, a GPU, p = 0) it is the plain module. Its dropout is the
    module's own ``dropout.p``; the masks are those of
    :class:`transformer_lib.fast.dropout.FastDropout`.
    """

    kernels: bool = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not cheap_mask_applies(self.dropout, x):
            return super().forward(x)
        p = self.dropout.p
        if (
            self.kernels
            and x.dtype == self.w_1.weight.dtype
            and not torch.is_autocast_enabled("cpu")
        ):
            return _CompiledFeedForward.apply(
                x, self.w_1.weight, self.w_1.bias, self.w_2.weight, self.w_2.bias, p
            )
        return self.w_2(relu_dropout(self.w_1(x), p, self.kernels))  # (B, L, D)
