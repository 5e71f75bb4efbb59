"""The workload every training benchmark times: presets, the batch, both models, the step.

One training step = forward, cross-entropy loss, backward, Adam step. Both models get the
same sizes, the same batch, the same masks (source padding; target padding + causal), the
same embeddings (``TokenEmbedding`` + ``PositionalEncoding``), the same output layer and the
same optimizer (``Adam(fused=True)``, as ``transformer_lib``'s trainer uses). Dropout is
P_drop on sub-layer outputs, embeddings and the feed-forward hidden layer in both, and 0 on
attention weights in both (the paper has none there; ``nn.Transformer`` would put its single
``dropout`` there too, so it is switched off in its attention modules).
"""

from __future__ import annotations

import contextlib
from typing import Callable, Dict, NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from transformer_lib.config import TransformerConfig
from transformer_lib.embedding import TokenEmbedding
from transformer_lib.fast import accelerate, compile_model, kernels_available
from transformer_lib.masks import causal_mask
from transformer_lib.model import Transformer
from transformer_lib.positional import PositionalEncoding


class Preset(NamedTuple):
    """Model sizes (fields of ``TransformerConfig``), the batch (rows x tokens a row) and the
    shared vocabulary."""

    sizes: dict
    batch: int
    length: int
    vocab: int


PRESETS: Dict[str, Preset] = {
    "tiny": Preset(dict(N=2, d_model=32, d_ff=64, h=4), 32, 48, 1000),
    # the benchmark size: what the CPU figures of benchmarks/README.md are measured on
    "d256": Preset(dict(N=3, d_model=256, d_ff=1024, h=4), 32, 48, 1000),
    # Table 3's base model, the paper's 37,000 shared BPE tokens, ~25,000 tokens a batch (§5.1)
    "base": Preset(dict(N=6, d_model=512, d_ff=2048, h=8), 512, 48, 37000),
}
QUICK = {"tiny": Preset(dict(N=1, d_model=16, d_ff=32, h=2), 4, 8, 64)}


def preset_config(preset: Preset, vocab: Optional[int] = None, P_drop: float = 0.1):
    """The TransformerConfig of ``preset`` (its vocabulary unless ``vocab`` is given)."""
    return TransformerConfig.tiny(
        vocab or preset.vocab, P_drop=P_drop, max_len=max(128, preset.length + 1), **preset.sizes
    )


class TorchTransformer(nn.Module):
    """``torch.nn.Transformer`` between the same embeddings and output layer as ours."""

    def __init__(self, c: TransformerConfig):
        super().__init__()
        self.config = c
        self.src_embed = TokenEmbedding(c.src_vocab_size, c.d_model, c.pad_id)
        self.tgt_embed = (
            self.src_embed
            if c.tie_embeddings
            else TokenEmbedding(c.tgt_vocab_size, c.d_model, c.pad_id)
        )
        self.positions = PositionalEncoding(c.d_model, c.max_len, c.P_drop, c.pe_layout)
        self.transformer = nn.Transformer(
            c.d_model,
            c.h,
            c.N,
            c.N,
            c.d_ff,
            c.P_drop,
            batch_first=True,
            norm_first=c.norm_first,
            layer_norm_eps=c.layer_norm_eps,
        )
        for module in self.transformer.modules():  # no dropout on attention weights
            if isinstance(module, nn.MultiheadAttention):
                module.dropout = 0.0
        self.generator = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        if c.tie_embeddings:
            self.generator.weight = self.tgt_embed.weight

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        pad = self.config.pad_id
        src_blocked, tgt_blocked = src == pad, tgt == pad  # True = blocked
        causal_blocked = ~causal_mask(tgt.shape[1], tgt.device)[0, 0]  # (T, T)
        h = self.transformer(
            self.positions(self.src_embed(src)),
            self.positions(self.tgt_embed(tgt)),
            tgt_mask=causal_blocked,
            src_key_padding_mask=src_blocked,
            tgt_key_padding_mask=tgt_blocked,
            memory_key_padding_mask=src_blocked,
            tgt_is_causal=True,
        )  # (B, T, D)
        return self.generator(h)  # (B, T, V)


def make_batch(
    c: TransformerConfig,
    batch: int,
    length: int,
    device: torch.device,
    gen: torch.Generator,
    shortest: float = 0.75,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Random ids with padding: each row keeps between ``shortest`` x ``length`` tokens and
    all of them (the first row all of them)."""

    def ids(vocab: int) -> torch.Tensor:
        x = torch.randint(1, vocab, (batch, length), generator=gen)
        keep = torch.randint(max(1, int(shortest * length)), length + 1, (batch, 1), generator=gen)
        x[torch.arange(length)[None, :] >= keep] = c.pad_id
        x[0] = torch.randint(1, vocab, (length,), generator=gen)  # one full row
        return x.to(device)

    return ids(c.src_vocab_size), ids(c.tgt_vocab_size)


def matmul_flops(c: TransformerConfig, batch: int, S: int, T: int) -> float:
    """Matmul FLOPs of one training step (forward + backward = 3 x forward).

    Forward: 2 FLOPs per weight per token for every Linear (attention projections, the
    feed-forward network, the output layer) plus the two attention products
    (Q K^T and weights @ V: 2 * 2 * T_q * T_k * D per layer). Embedding look-ups, softmax,
    layer norms and the loss are not counted (not matmuls).
    """
    D, F_, N, V = c.d_model, c.d_ff, c.N, c.tgt_vocab_size
    per_token_enc = 4 * D * D + 2 * D * F_  # Q,K,V,O + FFN, per source token
    per_token_dec = 4 * D * D + 2 * D * D + 2 * D * F_ + D * V  # self Q,K,V,O; cross Q,O; FFN; out
    per_src_cross = 2 * D * D  # cross K,V from the memory
    linear = 2 * batch * (N * (S * per_token_enc + T * per_token_dec + S * per_src_cross))
    linear -= 2 * batch * T * D * V * (N - 1)  # the output layer runs once
    attn = 2 * 2 * batch * D * N * (S * S + T * T + T * S)
    return 3.0 * (linear + attn)


def step_matmul_shapes(c: TransformerConfig, batch: int, S: int, T: int) -> list:
    """The (m, k, n) of every linear layer's product in one training step, sorted, once each.

    Forward (m tokens x k inputs @ k x n outputs): W^Q;W^K;W^V, W^O and both feed-forward
    layers over source and target tokens, cross-attention's W^Q and W^K;W^V, the output
    layer; backward, for each: the input's gradient (m, n, k) and the weight's (n, m, k).
    :func:`common.matmul_peak` measures the peak on these, the sizes the rows run.
    """
    D, F_, V = c.d_model, c.d_ff, c.tgt_vocab_size
    forward = {
        (batch * S, D, 3 * D),
        (batch * T, D, 3 * D),
        (batch * S, D, D),
        (batch * T, D, D),
        (batch * S, D, 2 * D),
        (batch * S, D, F_),
        (batch * T, D, F_),
        (batch * S, F_, D),
        (batch * T, F_, D),
        (batch * T, D, V),
    }
    shapes = set()
    for m, k, n in forward:
        shapes |= {(m, k, n), (m, n, k), (n, m, k)}
    return sorted(shapes)


def train_step_fn(
    model: nn.Module,
    src: torch.Tensor,
    tgt: torch.Tensor,
    pad_id: int,
    autocast: bool,
    device: torch.device,
    fused_adam: bool = True,
) -> Callable[[], None]:
    """A closure doing one step: teacher forcing on tgt[:, :-1] -> tgt[:, 1:]; with
    ``autocast``, the forward pass under bf16 autocast on ``device``."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, **({"fused": True} if fused_adam else {}))
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]

    def context():
        if autocast:
            return torch.autocast(device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with context():
            logits = model(src, tgt_in)  # (B, T, V)
            loss = F.cross_entropy(
                logits.flatten(0, 1).float(), tgt_out.flatten(), ignore_index=pad_id
            )
        loss.backward()
        opt.step()

    return step


# row -> how it is made from the plain model (None: as it is)
ROWS: Dict[str, Optional[Callable[[nn.Module, torch.device], nn.Module]]] = {
    "torch.nn.Transformer": None,
    "transformer_lib": None,
    "+ accelerate, no kernels": lambda m, d: accelerate(m, kernels=False),
    "+ compiled kernels": lambda m, d: accelerate(m, kernels=True),
    "transformer_lib compiled": lambda m, d: torch.compile(m),
    "+ compile_model": lambda m, d: compile_model(m, d),
}


def make_model(label: str, c: TransformerConfig, device: torch.device) -> nn.Module:
    """A fresh model of benchmark row ``label`` (a key of :data:`ROWS`):
    ``torch.nn.Transformer`` between our embeddings; our plain model (as the notebooks run
    it); our model through :func:`transformer_lib.fast.accelerate` without or with the
    compiled kernels (the latter is what the training command line runs on a CPU);
    ``torch.compile(model)`` with Inductor's defaults; :func:`transformer_lib.fast.compile_model`
    (the command line's ``--compile``)."""
    if label == "torch.nn.Transformer":
        return TorchTransformer(c).to(device).train()
    model = Transformer(c).to(device).train()
    make = ROWS[label]
    return model if make is None else make(model, device)


def compiled_kernels_usable(wanted: bool, device: torch.device) -> bool:
    """Whether to add the "+ compiled kernels" row (built here, once, if needed)."""
    if not wanted or device.type != "cpu":
        return False
    problem = kernels_available()
    if problem is not None:
        print(f"# compiled kernels left out: {problem}")
        return False
    return True
