"""The complete encoder-decoder Transformer (§3, Figure 1)."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple, Union

import torch
from torch import nn

from .checks import check_mask, check_sequence, check_token_ids, checked_inputs
from .config import TransformerConfig
from .decoder import Decoder, KVCache, check_cache
from .embedding import TokenEmbedding
from .encoder import Encoder
from .masks import padding_mask
from .positional import PositionalEncoding

Tensor = torch.Tensor
Weights = Dict[str, list]


class Transformer(nn.Module):
    """Embeddings + positions, encoder, decoder and the pre-softmax projection.

    With ``config.tie_embeddings`` the source embedding, the target embedding and the
    output projection share one (V, D) matrix (§3.4).

    Masks are boolean, True = may attend. When not given, ``src_mask`` is built from
    ``config.pad_id`` and the decoder's self-attention is causal and ignores padded targets.

    Shape:
        src: (B, S) ids, tgt: (B, T) ids  ->  logits (B, T, V)
        src_mask: broadcastable to (B, H, 1, S); tgt_mask: broadcastable to (B, H, T, T)
        (the causal mask is always added to ``tgt_mask``).
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
        c = self.config = config
        self.src_embed = TokenEmbedding(c.src_vocab_size, c.d_model, c.pad_id)
        self.tgt_embed = (self.src_embed if c.tie_embeddings
                          else TokenEmbedding(c.tgt_vocab_size, c.d_model, c.pad_id))
        self.positions = PositionalEncoding(c.d_model, c.max_len, c.P_drop, c.pe_layout)
        self.encoder = Encoder(c)
        self.decoder = Decoder(c)
        self.generator = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        for p in list(self.encoder.parameters()) + list(self.decoder.parameters()):
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        if c.tie_embeddings:
            self.generator.weight = self.tgt_embed.weight

    # --------------------------------------------------------------------------------
    def encode(self, src: Tensor, src_mask: Optional[Tensor] = None,
               need_weights: bool = False) -> Union[Tensor, Tuple[Tensor, List]]:
        """Source ids (B, S) -> memory (B, S, D) [, encoder weights per layer]."""
        check_token_ids(src, "src", self.config.src_vocab_size)
        memory, weights = self._encode(src, self._src_mask(src, src_mask), need_weights)
        return (memory, weights) if need_weights else memory

    def _encode(self, src: Tensor, src_mask: Tensor,
                need_weights: bool) -> Tuple[Tensor, List]:
        x = self.positions(self.src_embed.scaled(src))                        # (B, S, D)
        with checked_inputs():                 # src_mask is checked: the layers need not
            return self.encoder(x, src_mask, need_weights)                    # (B, S, D)

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Optional[Tensor] = None,
               tgt_mask: Optional[Tensor] = None, cache: Optional[KVCache] = None,
               need_weights: bool = False, src: Optional[Tensor] = None
               ) -> Union[Tensor, Tuple[Tensor, List]]:
        """Target ids (B, T) and memory (B, S, D) -> logits (B, T, V) [, weights per layer].

        ``src_mask`` masks padded source positions (pass it, or ``src`` to rebuild it).
        With a :class:`KVCache`, ``tgt`` holds only the new positions: earlier positions'
        keys and values come from the cache, which this call extends.
        """
        c = self.config
        self._check_target(tgt, memory, cache)
        check_sequence(memory, "memory", c.d_model)        # the layers take it as checked
        if src_mask is None and src is not None:
            check_token_ids(src, "src", c.src_vocab_size)
            src_mask = padding_mask(src, c.pad_id)                            # (B, 1, 1, S)
        check_mask(src_mask, "src_mask", (tgt.shape[0], c.h, 1, memory.shape[1]))
        logits, weights = self._decode(tgt, memory, src_mask, tgt_mask, cache, need_weights)
        return (logits, weights) if need_weights else logits

    def _decode(self, tgt: Tensor, memory: Tensor, src_mask: Optional[Tensor],
                tgt_mask: Optional[Tensor], cache: Optional[KVCache],
                need_weights: bool) -> Tuple[Tensor, List]:
        """:meth:`decode` once ``tgt``, ``memory``, ``src_mask`` and ``cache`` are checked."""
        c = self.config
        B, T = tgt.shape
        offset = 0 if cache is None else cache.length
        if tgt_mask is None and cache is None:
            tgt_mask = padding_mask(tgt, c.pad_id)                            # (B, 1, 1, T)
        check_mask(tgt_mask, "tgt_mask", (B, c.h, T, offset + T))
        y = self.positions(self.tgt_embed.scaled(tgt), offset=offset)         # (B, T, D)
        with checked_inputs():                 # memory, the masks and cache are checked
            h, weights = self.decoder(y, memory, tgt_mask, src_mask, need_weights, cache,
                                      is_causal=True)                         # (B, T, D)
        return self.generator(h), weights                                     # (B, T, V)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Optional[Tensor] = None,
                tgt_mask: Optional[Tensor] = None, need_weights: bool = False
                ) -> Union[Tensor, Tuple[Tensor, Weights]]:
        """Teacher-forced pass: logits (B, T, V) for every target position.

        With ``need_weights=True`` also returns ``{"encoder": [...], "decoder_self": [...],
        "decoder_cross": [...]}``, one (B, H, T_q, T_k) tensor per layer.
        """
        check_token_ids(src, "src", self.config.src_vocab_size)     # each input checked once
        src_mask = self._src_mask(src, src_mask)
        memory, enc_w = self._encode(src, src_mask, need_weights)
        self._check_target(tgt, memory, None)
        logits, dec_w = self._decode(tgt, memory, src_mask, tgt_mask, None, need_weights)
        if not need_weights:
            return logits
        return logits, {"encoder": enc_w,
                        "decoder_self": [w["self"] for w in dec_w],
                        "decoder_cross": [w["cross"] for w in dec_w]}

    def new_cache(self) -> KVCache:
        """An empty key/value cache for incremental decoding with :meth:`decode`."""
        return KVCache(self.config.N)

    def _check_target(self, tgt: Tensor, memory: Tensor, cache: Optional[KVCache]) -> None:
        check_token_ids(tgt, "tgt", self.config.tgt_vocab_size)
        if cache is not None:
            check_cache(cache, self.config.N)
        _check_batches(tgt, memory, cache)

    def _src_mask(self, src: Tensor, src_mask: Optional[Tensor]) -> Tensor:
        """The given source mask, checked, or else the padding mask of ``src``."""
        c = self.config
        if src_mask is None:
            return padding_mask(src, c.pad_id)                                # (B, 1, 1, S)
        check_mask(src_mask, "src_mask", (src.shape[0], c.h, 1, src.shape[1]))
        return src_mask


def _check_batches(tgt: Tensor, memory: Tensor, cache: Optional[KVCache]) -> None:
    """tgt, memory and a used cache must hold the same number of sequences."""
    if not isinstance(memory, torch.Tensor) or memory.dim() != 3:
        got = tuple(memory.shape) if isinstance(memory, torch.Tensor) else type(memory).__name__
        raise ValueError(f"memory must have shape (B, S, D) (the output of encode), got {got}")
    if memory.shape[0] != tgt.shape[0]:
        raise ValueError(f"tgt holds a batch of {tgt.shape[0]} sequences but memory (the "
                         f"encoded src) holds {memory.shape[0]}: src and tgt must have the "
                         "same batch size")
    if cache is not None and cache.batch_size not in (None, tgt.shape[0]):
        raise ValueError(f"cache holds keys and values of a batch of {cache.batch_size}, but "
                         f"tgt holds {tgt.shape[0]}: start each new batch with "
                         "model.new_cache()")
