"""A decoder-only language model from the lesson's layers, and the changes made since 2017.

GPT-style models keep the decoder alone: each block is the decoder layer of §3.1 without its
cross-attention (masked self-attention, then the feed-forward network, each in a residual
block), and the model predicts the next token of one sequence. With every choice of
:class:`LMConfig` at its default, the blocks are the library's own ``MultiHeadAttention``,
``PositionwiseFeedForward`` and ``ResidualNorm``, post-norm, with sinusoids added to the
embeddings: the paper's choices. Each later change is one field:

* ``norm_first=True``: pre-norm residual blocks (Xiong et al. 2020);
* ``norm="rms"``: RMSNorm in place of LayerNorm (Zhang & Sennrich 2019);
* ``ffn="swiglu"``: the SwiGLU feed-forward network (Shazeer 2020);
* ``positions="rope"``: rotary position embeddings on queries and keys (Su et al. 2021);
* ``kv_heads``: grouped-query attention, ``kv_heads`` key/value heads shared by the h query
  heads (Ainslie et al. 2023); ``kv_heads=1`` is multi-query attention (Shazeer 2019).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention, fused_attention
from .checks import check_choice, check_float, check_ids, check_int
from .embedding import TokenEmbedding
from .feedforward import PositionwiseFeedForward
from .masks import causal_mask
from .positional import PositionalEncoding
from .residual import ResidualNorm

Tensor = torch.Tensor


@dataclass(frozen=True)
class LMConfig:
    """A decoder-only model's sizes and choices; the defaults of the choices are the paper's."""

    vocab_size: int
    N: int = 2
    d_model: int = 128
    h: int = 4
    d_ff: int = 512
    P_drop: float = 0.1
    max_len: int = 256
    pad_id: int = 0
    norm_first: bool = False
    norm: str = "layer"
    ffn: str = "relu"
    positions: str = "sinusoidal"
    kv_heads: Optional[int] = None  # None: h, multi-head attention

    def __post_init__(self) -> None:
        for name in ("vocab_size", "N", "d_model", "h", "d_ff", "max_len"):
            check_int(getattr(self, name), name, 1)
        check_int(self.pad_id, "pad_id", 0)
        check_float(self.P_drop, "P_drop", 0.0, 1.0, max_open=True)
        check_choice(self.norm, "norm", ("layer", "rms"))
        check_choice(self.ffn, "ffn", ("relu", "swiglu"))
        check_choice(self.positions, "positions", ("sinusoidal", "learned", "rope"))
        if self.d_model % self.h or (self.d_model // self.h) % 2:
            raise ValueError(f"d_model / h must be an even whole number, got d_model="
                             f"{self.d_model}, h={self.h}")
        kv = check_int(self.heads_kv, "kv_heads", 1)
        if self.h % kv:
            raise ValueError(f"kv_heads must divide h={self.h}, got {kv}")

    @property
    def heads_kv(self) -> int:
        return self.h if self.kv_heads is None else self.kv_heads


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * g: LayerNorm without the mean and the bias (Zhang &
    Sennrich 2019). Shape: (..., D) -> (..., D)."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: Tensor) -> Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class SwiGLU(nn.Module):
    """FFN(x) = (Swish(x W) * x V) W_2, no biases (Shazeer 2020): a gate on the hidden units.
    Three matrices: d_ff = 2/3 of ReLU's keeps the parameters equal. (B, L, D) -> (B, L, D)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.w_gate = nn.Linear(d_model, d_ff, bias=False)
        self.w_up = nn.Linear(d_model, d_ff, bias=False)
        self.w_down = nn.Linear(d_ff, d_model, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_down(self.dropout(F.silu(self.w_gate(x)) * self.w_up(x)))


def rope(x: Tensor, start: int = 0, base: float = 10000.0) -> Tensor:
    """Rotary position embedding (Su et al. 2021): each pair (2i, 2i+1) of a query or key at
    position p turned by the angle p / base^(2i/d), the sinusoids' angles of §3.5. A dot
    product of two turned vectors then depends on their distance only.
    x: (B, H, T, d) at positions start .. start + T - 1 -> (B, H, T, d)."""
    d = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    pos = torch.arange(start, start + x.shape[-2], device=x.device, dtype=torch.float32)
    angle = pos[:, None] * inv_freq                                          # (T, d/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]                                   # (B, H, T, d/2)
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with h query heads and ``kv_heads`` key/value heads, each
    key/value head shared by h / kv_heads query heads; optional rotary positions. The
    cache then holds kv_heads heads, not h: h / kv_heads times less memory per token.
    Called as ``MultiHeadAttention`` is for self-attention; returns (out, None)."""

    def __init__(self, d_model: int, h: int, kv_heads: int, use_rope: bool = False):
        super().__init__()
        self.h, self.kv_heads, self.d_head, self.use_rope = h, kv_heads, d_model // h, use_rope
        self.q_proj = nn.Linear(d_model, d_model)
        self.kv_proj = nn.Linear(d_model, 2 * kv_heads * self.d_head)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, memory: None = None, mask: Optional[Tensor] = None,
                need_weights: bool = False, cache: Optional[dict] = None) -> Tuple[Tensor, None]:
        B, T, D = x.shape
        q = self.q_proj(x).view(B, T, self.h, self.d_head).transpose(1, 2)   # (B, H, T, d)
        kv = self.kv_proj(x).view(B, T, 2 * self.kv_heads, self.d_head).transpose(1, 2)
        k, v = kv.chunk(2, dim=1)                                            # (B, G, T, d)
        past = cache["k"].shape[2] if cache is not None and "k" in cache else 0
        if self.use_rope:
            q, k = rope(q, past), rope(k, past)
        if cache is not None:
            if past:
                k, v = torch.cat((cache["k"], k), 2), torch.cat((cache["v"], v), 2)  # (B, G, S, d)
            cache["k"], cache["v"] = k, v
        group = self.h // self.kv_heads                  # query heads per key/value head
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)  # (B, H, S, d)
        out = fused_attention(q, k, v, mask)                                 # (B, H, T, d)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, D)), None


class LMBlock(nn.Module):
    """The decoder layer of §3.1 without cross-attention: masked self-attention, then the
    feed-forward network, each in a residual block. Its parameters carry the names of
    ``DecoderLayer``'s. (B, T, D) -> (B, T, D)."""

    def __init__(self, c: LMConfig):
        super().__init__()
        self.self_attn: nn.Module = (
            GroupedQueryAttention(c.d_model, c.h, c.heads_kv, c.positions == "rope")
            if c.positions == "rope" or c.heads_kv != c.h else MultiHeadAttention(c.d_model, c.h))
        self.feed_forward = (SwiGLU(c.d_model, c.d_ff, c.P_drop) if c.ffn == "swiglu" else
                             PositionwiseFeedForward(c.d_model, c.d_ff, c.P_drop))
        self.self_block, self.ff_block = (ResidualNorm(c.d_model, c.P_drop, c.norm_first)
                                          for _ in range(2))
        if c.norm == "rms":                              # the residual blocks' norm swapped
            for block in (self.self_block, self.ff_block):
                block.norm = RMSNorm(c.d_model)  # type: ignore[assignment]

    def forward(self, x: Tensor, mask: Tensor, cache: Optional[dict] = None) -> Tensor:
        x, _ = self.self_block(x, self.self_attn, mask=mask, cache=cache)
        return self.ff_block(x, self.feed_forward)


class LanguageModel(nn.Module):
    """Embeddings (x sqrt(d_model), §3.4) and positions, N blocks, and the generator tied to
    the embedding: logits of the next token at every position.

    Shape:
        ids: (B, T) token ids, padding (if any) at the end of a row, where the causal mask
        keeps every real token from seeing it -> logits (B, T, V). ``cache``: a list of N
        dicts (see :meth:`new_cache`) that keeps the keys and values of earlier calls.
    """

    def __init__(self, config: LMConfig):
        super().__init__()
        c = self.config = config
        self.embed = TokenEmbedding(c.vocab_size, c.d_model, c.pad_id)
        self.positions = (nn.Dropout(c.P_drop) if c.positions == "rope" else
                          PositionalEncoding(c.d_model, c.max_len, c.P_drop,
                                             learned=c.positions == "learned"))
        self.layers = nn.ModuleList(LMBlock(c) for _ in range(c.N))
        norm = RMSNorm(c.d_model) if c.norm == "rms" else nn.LayerNorm(c.d_model)
        self.norm = norm if c.norm_first else nn.Identity()
        self.generator = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.generator.weight = self.embed.weight                            # tied (§3.4)

    def new_cache(self) -> List[dict]:
        return [{} for _ in self.layers]

    def forward(self, ids: Tensor, cache: Optional[List[dict]] = None) -> Tensor:
        c = self.config
        check_ids(ids, "ids", c.vocab_size)
        past = cache[0]["k"].shape[2] if cache and "k" in cache[0] else 0
        if past + ids.shape[1] > c.max_len:
            raise ValueError(f"ids: {past} cached + {ids.shape[1]} new positions exceed "
                             f"max_len={c.max_len}")
        mask = causal_mask(ids.shape[1], ids.device, past)                   # (1, 1, T, S)
        x = self.embed(ids)                                                  # (B, T, D)
        x = self.positions(x) if c.positions == "rope" else self.positions(x, offset=past)
        for i, layer in enumerate(self.layers):
            x = layer(x, mask, None if cache is None else cache[i])
        return self.generator(self.norm(x))                                  # (B, T, V)


@torch.no_grad()
def generate(model: LanguageModel, prompt: Tensor, max_new: int, temperature: float = 1.0,
             top_k: Optional[int] = None, eos_id: Optional[int] = None,
             generator: Optional[torch.Generator] = None) -> Tensor:
    """Continue each row of ``prompt`` (B, T), rows of equal length without padding, by up to
    ``max_new`` tokens with the key/value cache: ``temperature=0`` is greedy; otherwise sample
    from softmax(logits / temperature), kept to the ``top_k`` likeliest tokens if given.
    Returns (B, T + n); a row that has produced ``eos_id`` continues with it."""
    check_ids(prompt, "prompt", model.config.vocab_size)
    check_int(max_new, "max_new", 0)
    check_float(temperature, "temperature", 0.0)
    if top_k is not None:
        check_int(top_k, "top_k", 1)
    was_training, cache, out = model.training, model.new_cache(), prompt
    model.eval()
    logits = model(prompt, cache)[:, -1]                                     # (B, V)
    done = torch.zeros(len(prompt), dtype=torch.bool, device=prompt.device)
    for _ in range(max_new):
        if temperature == 0:
            token = logits.argmax(-1)                                        # greedy
        else:
            logits = logits / temperature
            if top_k is not None:                        # all but the k likeliest: -inf
                kth = logits.topk(min(top_k, logits.shape[-1]), -1).values[:, -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            token = torch.multinomial(logits.softmax(-1), 1, generator=generator)[:, 0]
        if eos_id is not None:
            token = token.masked_fill(done, eos_id)
            done = done | (token == eos_id)
        out = torch.cat((out, token[:, None]), 1)                            # (B, T + n)
        if bool(done.all()) or out.shape[1] >= model.config.max_len:
            break
        logits = model(token[:, None], cache)[:, -1]
    model.train(was_training)
    return out
