"""transformer_lib: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

Dimension legend, used in every shape comment of the package:

    B  batch size                 S  source length          T  target length
    D  d_model (model width)      H  number of heads (h)    d_k  per-head size, D / H
    V  vocabulary size            L  any sequence length

Masks are boolean with True = may attend, broadcastable to (B, H, T_q, T_k), and are built
in :mod:`transformer_lib.masks` only.
"""
from .attention import MultiHeadAttention, attention, fused_attention
from .config import TransformerConfig
from .decoder import Decoder, DecoderLayer, KVCache
from .embedding import TokenEmbedding
from .encoder import Encoder, EncoderLayer
from .feedforward import PositionwiseFeedForward
from .masks import causal_mask, combine, decoder_mask, padding_mask, to_blocked
from .model import Transformer
from .positional import PositionalEncoding, sinusoidal_table
from .residual import ResidualNorm

__all__ = [
    "Transformer", "TransformerConfig", "MultiHeadAttention", "attention", "fused_attention",
    "Encoder", "EncoderLayer", "Decoder", "DecoderLayer", "KVCache", "TokenEmbedding",
    "PositionalEncoding", "sinusoidal_table", "PositionwiseFeedForward", "ResidualNorm",
    "padding_mask", "causal_mask", "decoder_mask", "combine", "to_blocked",
]
__version__ = "0.1.0"
