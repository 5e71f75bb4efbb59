"""The complete encoder-decoder Transformer (§3, Figure 1)."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple, Union, cast

import torch
from torch import nn

from .checks import check_ids, check_mask, check_sequence
from .config import TransformerConfig
from .decoder import Decoder, KVCache
from .embedding import TokenEmbedding
from .encoder import Encoder
from .masks import causal_mask, padding_mask
from .positional import PositionalEncoding

Tensor = torch.Tensor


class Transformer(nn.Module):
    """Embeddings + positions, encoder, decoder and the pre-softmax projection (the
    "generator": the linear layer that turns the decoder's output into logits over the
    target vocabulary).

    With ``config.tie_embeddings`` the source embedding, the target embedding and the
    generator share one (V, D) matrix (§3.4).

    Masks are boolean, True = may attend. When not given, ``src_mask`` is built from
    ``config.pad_id``, and the decoder's self-attention ignores padded targets; the causal
    mask is always added to ``tgt_mask``.

    Shape:
        src: (B, S) ids, tgt: (B, T) ids  ->  logits (B, T, V)
        src_mask: broadcastable to (B, H, 1, S); tgt_mask: broadcastable to (B, H, T, T).
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
        c = self.config = config
        self.src_embed = TokenEmbedding(c.src_vocab_size, c.d_model, c.pad_id)
        self.tgt_embed = (self.src_embed if c.tie_embeddings
                          else TokenEmbedding(c.tgt_vocab_size, c.d_model, c.pad_id))
        self.positions = PositionalEncoding(c.d_model, c.max_len, c.P_drop, c.pe_layout,
                                            learned=c.positions == "learned")
        self.encoder = Encoder(c)
        self.decoder = Decoder(c)
        self.generator = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        for p in list(self.encoder.parameters()) + list(self.decoder.parameters()):
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)                    # Glorot & Bengio (2010)
        if c.tie_embeddings:
            self.generator.weight = self.tgt_embed.weight

    def encode(self, src: Tensor, src_mask: Optional[Tensor] = None,
               need_weights: bool = False) -> Union[Tensor, Tuple[Tensor, List]]:
        """Source ids (B, S) -> memory (B, S, D) [, encoder weights per layer]."""
        src_mask = self.source_mask(src, src_mask)
        x = self.positions(self.src_embed(src))                               # (B, S, D)
        memory, weights = self.encoder(x, src_mask, need_weights)             # (B, S, D)
        return (memory, weights) if need_weights else memory

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Optional[Tensor] = None,
               tgt_mask: Optional[Tensor] = None, cache: Optional[KVCache] = None,
               need_weights: bool = False) -> Union[Tensor, Tuple[Tensor, List]]:
        """Target ids (B, T) and memory (B, S, D) -> logits (B, T, V) [, weights per layer].

        ``src_mask`` hides padded source positions (None: every position is seen). With a
        :class:`KVCache`, ``tgt`` holds only the new positions: the keys and values of the
        earlier ones come from the cache, which this call extends.
        """
        c = self.config
        check_ids(tgt, "tgt", c.tgt_vocab_size)
        B, T = tgt.shape
        check_sequence(memory, "memory", c.d_model, batch=B, dtype=self.generator.weight.dtype)
        check_mask(src_mask, "src_mask", (B, c.h, 1, memory.shape[1]))
        past = 0
        if cache is not None:
            if not isinstance(cache, KVCache) or len(cache.self_attn) != c.N:
                raise TypeError(f"cache must be the KVCache of this model (model.new_cache()), "
                                f"got {type(cache).__name__}")
            if cache.batch_size not in (None, B):
                raise ValueError(f"cache holds a batch of {cache.batch_size}, tgt one of {B}: "
                                 "start each new batch with model.new_cache()")
            past = cache.length
        if tgt_mask is None and cache is None:
            tgt_mask = padding_mask(tgt, c.pad_id)                            # (B, 1, 1, T)
        check_mask(tgt_mask, "tgt_mask", (B, c.h, T, past + T))
        causal = causal_mask(T, tgt.device, past)                             # (1, 1, T, past+T)
        tgt_mask = causal if tgt_mask is None else tgt_mask & causal
        y = self.positions(self.tgt_embed(tgt), offset=past)                  # (B, T, D)
        h, weights = self.decoder(y, memory, tgt_mask, src_mask, need_weights, cache)
        logits = self.generator(h)                                            # (B, T, V)
        return (logits, weights) if need_weights else logits

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Optional[Tensor] = None,
                tgt_mask: Optional[Tensor] = None, need_weights: bool = False
                ) -> Union[Tensor, Tuple[Tensor, Dict[str, list]]]:
        """Teacher-forced pass: logits (B, T, V) for every target position.

        With ``need_weights=True`` also returns ``{"encoder": [...], "decoder_self": [...],
        "decoder_cross": [...]}``, one (B, H, T_q, T_k) tensor per layer.
        """
        src_mask = self.source_mask(src, src_mask)
        check_ids(tgt, "tgt")
        if tgt.shape[0] != src.shape[0]:
            raise ValueError(f"src and tgt must hold the same number of sequences, got "
                             f"{src.shape[0]} and {tgt.shape[0]}")
        if not need_weights:
            memory = cast(Tensor, self.encode(src, src_mask))                 # (B, S, D)
            return cast(Tensor, self.decode(tgt, memory, src_mask, tgt_mask))  # (B, T, V)
        memory, enc_w = self.encode(src, src_mask, need_weights=True)
        logits, dec_w = self.decode(tgt, memory, src_mask, tgt_mask, need_weights=True)
        return logits, {"encoder": enc_w,
                        "decoder_self": [w["self"] for w in dec_w],
                        "decoder_cross": [w["cross"] for w in dec_w]}

    def source_mask(self, src: Tensor, src_mask: Optional[Tensor] = None) -> Tensor:
        """The given source mask, checked, or else the padding mask of ``src``."""
        c = self.config
        check_ids(src, "src", c.src_vocab_size)
        if src_mask is None:
            return padding_mask(src, c.pad_id)                                # (B, 1, 1, S)
        check_mask(src_mask, "src_mask", (src.shape[0], c.h, 1, src.shape[1]))
        return src_mask

    def new_cache(self) -> KVCache:
        """An empty key/value cache for incremental decoding with :meth:`decode`."""
        return KVCache(self.config.N)
