"""The model's hyper-parameters: one frozen dataclass with the paper's names (Table 3)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

from .checks import check_bool, check_choice, check_float, check_int


@dataclass(frozen=True)
class TransformerConfig:
    """Hyper-parameters of the Transformer, named as in the paper (§3, Table 3).

    Attributes:
        src_vocab_size, tgt_vocab_size: vocabulary sizes.
        N: layers in the encoder and in the decoder.
        d_model: width of every sub-layer output and of the embeddings.
        d_ff: inner width of the position-wise feed-forward network.
        h: attention heads.
        d_k: per-head size of queries and keys; None: d_model / h (Table 3, row B varies it;
            values keep d_v = d_model / h).
        P_drop: dropout on sub-layer outputs and on embeddings + positions (§5.4).
        attn_drop: dropout on attention weights (not in the paper; PyTorch has it).
        max_len: the longest sequence accepted (rows of the position table).
        pad_id: id of the padding token (its embedding stays zero).
        norm_first: False = post-norm ``LayerNorm(x + Sublayer(x))`` as in the paper;
            True = pre-norm ``x + Sublayer(LayerNorm(x))`` with a final LayerNorm.
        tie_embeddings: one matrix for both embeddings and the pre-softmax projection (§3.4).
        positions: ``"sinusoidal"`` (§3.5) or ``"learned"`` (Table 3, row E).
        pe_layout: sinusoids ``"interleaved"`` (the paper's sin, cos, sin, ...) or ``"concat"``
            (``[sin | cos]``, a fixed permutation of the columns).
        layer_norm_eps: epsilon of every LayerNorm.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    N: int = 6
    d_model: int = 512
    d_ff: int = 2048
    h: int = 8
    d_k: Optional[int] = None
    P_drop: float = 0.1
    attn_drop: float = 0.0
    max_len: int = 512
    pad_id: int = 0
    norm_first: bool = False
    tie_embeddings: bool = True
    positions: str = "sinusoidal"
    pe_layout: str = "interleaved"
    layer_norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "N", "d_model", "d_ff", "h", "max_len"):
            check_int(getattr(self, name), name, 1)
        if self.d_model % self.h:
            raise ValueError(f"d_model must be divisible by h (heads), got d_model="
                             f"{self.d_model}, h={self.h}")
        if self.d_k is not None:
            check_int(self.d_k, "d_k", 1)
        check_choice(self.positions, "positions", ("sinusoidal", "learned"))
        check_choice(self.pe_layout, "pe_layout", ("interleaved", "concat"))
        if self.positions == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"d_model must be even for sinusoidal positions (sin/cos pairs), "
                             f"got {self.d_model}")
        for name in ("P_drop", "attn_drop"):
            check_float(getattr(self, name), name, 0.0, 1.0, max_open=True)
        check_int(self.pad_id, "pad_id", 0, min(self.src_vocab_size, self.tgt_vocab_size) - 1)
        check_bool(self.norm_first, "norm_first")
        check_bool(self.tie_embeddings, "tie_embeddings")
        if self.tie_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(f"tie_embeddings=True needs src_vocab_size == tgt_vocab_size, got "
                             f"{self.src_vocab_size} and {self.tgt_vocab_size}")
        check_float(self.layer_norm_eps, "layer_norm_eps", 0.0, min_open=True)

    def replace(self, **changes: Any) -> "TransformerConfig":
        """A copy with some fields changed (checked again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def base(cls, src_vocab_size: int = 37000, tgt_vocab_size: Optional[int] = None,
             **overrides: Any) -> "TransformerConfig":
        """Table 3, "base": N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1 (65M parameters)."""
        return cls.preset(dict(N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1),
                          src_vocab_size, tgt_vocab_size, overrides)

    @classmethod
    def big(cls, src_vocab_size: int = 37000, tgt_vocab_size: Optional[int] = None,
            **overrides: Any) -> "TransformerConfig":
        """Table 3, "big": N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3 (213M parameters)."""
        return cls.preset(dict(N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3),
                          src_vocab_size, tgt_vocab_size, overrides)

    @classmethod
    def tiny(cls, src_vocab_size: int = 64, tgt_vocab_size: Optional[int] = None,
             **overrides: Any) -> "TransformerConfig":
        """Small enough for tests and notebooks: N=2, d_model=32, d_ff=64, h=4."""
        return cls.preset(dict(N=2, d_model=32, d_ff=64, h=4, P_drop=0.1, max_len=128),
                          src_vocab_size, tgt_vocab_size, overrides)

    @classmethod
    def preset(cls, sizes: dict, src_vocab_size: int, tgt_vocab_size: Optional[int],
               overrides: dict) -> "TransformerConfig":
        """``sizes`` with ``overrides`` on top; untied embeddings for two vocabularies."""
        tgt_vocab_size = src_vocab_size if tgt_vocab_size is None else tgt_vocab_size
        tie = src_vocab_size == tgt_vocab_size
        return cls(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size,
                   **{"tie_embeddings": tie, **sizes, **overrides})


PRESETS = {"tiny": TransformerConfig.tiny, "base": TransformerConfig.base,
           "big": TransformerConfig.big}
