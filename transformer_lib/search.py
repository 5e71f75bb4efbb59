"""Searching for the output sequence of a trained model: greedy decoding, beam search, and
:func:`translate`, sentences in and sentences out.

Both searches decode auto-regressively: the decoder sees BOS, predicts one token, is fed it
back, and so on (§3: "the model is auto-regressive"). With a
:class:`~transformer_lib.decoder.KVCache` each step feeds only the newest token; the keys
and values of earlier positions come from the cache instead of being recomputed, which
gives the same logits for far less work.

Both return ids *after* BOS, shape (B, <= max_len): EOS included where produced, every
position after it filled with ``config.pad_id``. The padding token is never produced.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, List, Optional, Sequence, cast

import torch

from .batching import pad_rows
from .checks import check_float, check_ids, check_int
from .decoder import KVCache
from .masks import padding_mask
from .model import Transformer
from .tokenizers import Tokenizer

Tensor = torch.Tensor


@contextlib.contextmanager
def inference(model: torch.nn.Module) -> Iterator[None]:
    """Eval mode (no dropout) and no autograd for the block; the mode is restored after."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def check_search(model: Transformer, src: Tensor, max_len: int, bos_id: int, eos_id: int) -> None:
    """The arguments every search takes, checked before any computation."""
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a transformer_lib Transformer, got {type(model).__name__}")
    c = model.config
    check_ids(src, "src", c.src_vocab_size, any_device=True)
    if src.shape[0] == 0:
        raise ValueError(f"src must hold at least one sequence, got shape {tuple(src.shape)}")
    check_int(max_len, "max_len", 1, c.max_len)
    check_int(bos_id, "bos_id", 0, c.tgt_vocab_size - 1)
    check_int(eos_id, "eos_id", 0, c.tgt_vocab_size - 1)
    if eos_id == c.pad_id:
        raise ValueError(f"eos_id must differ from the padding id {c.pad_id}: padding is never "
                         "produced, so decoding could not stop")


def next_log_probs(model: Transformer, ys: Tensor, memory: Tensor, src_mask: Tensor,
                   cache: Optional[KVCache]) -> Tensor:
    """log p(next token | prefix ys, source) for each row: (B, t) -> (B, V).

    With a cache only the newest token is fed; without one, the whole prefix is recomputed.
    Padding is excluded (it would change the meaning of the prefix without a cache).
    """
    new = ys if cache is None else ys[:, -1:]                                # (B, t) or (B, 1)
    logits = cast(Tensor, model.decode(new, memory, src_mask, cache=cache))[:, -1]  # (B, V)
    logits[:, model.config.pad_id] = float("-inf")
    return logits.float().log_softmax(dim=-1)                                # (B, V)


def greedy_decode(model: Transformer, src: Tensor, max_len: int, bos_id: int = 1, eos_id: int = 2,
                  use_cache: bool = True) -> Tensor:
    """Pick the most probable next token at every step until EOS or ``max_len`` tokens.

    ``use_cache=False`` recomputes the whole prefix at each step (the reference the cached
    path must equal token for token). Runs in eval mode under ``torch.no_grad()``.

    Shape:
        src: (B, S) ids -> (B, <= max_len) ids after BOS, pad after EOS.
    """
    check_search(model, src, max_len, bos_id, eos_id)
    pad = model.config.pad_id
    with inference(model):
        src_mask = padding_mask(src, pad)                                    # (B, 1, 1, S)
        memory = cast(Tensor, model.encode(src, src_mask))                   # (B, S, D)
        ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)  # (B,)
        cache = model.new_cache() if use_cache else None
        for _ in range(max_len):
            log_probs = next_log_probs(model, ys, memory, src_mask, cache)   # (B, V)
            token = log_probs.argmax(dim=-1).masked_fill(done, pad)          # (B,)
            ys = torch.cat((ys, token[:, None]), dim=1)                      # (B, t + 1)
            done |= token == eos_id
            if bool(done.all()):
                break
    return ys[:, 1:]                                                         # (B, <= max_len)


def gnmt_length_penalty(length: Tensor, alpha: float) -> Tensor:
    """GNMT's lp(Y) = ((5 + |Y|) / 6)^alpha (Wu et al., 2016, §7, Eq. 14).

    Beam search ranks hypotheses by log P(Y | X) / lp(Y): with ``alpha = 0`` that is the
    plain log-probability, which favours short outputs; larger ``alpha`` favours longer.
    """
    return ((5.0 + length.float()) / 6.0) ** alpha


def beam_search(model: Transformer, src: Tensor, max_len: int, beam_size: int = 4,
                length_penalty: float = 0.6, bos_id: int = 1, eos_id: int = 2,
                use_cache: bool = True) -> Tensor:
    """Keep the ``beam_size`` best hypotheses per item; return the best one (§6.1).

    The B items x K hypotheses are flattened into one batch of B*K rows; after each step
    the cache follows each surviving hypothesis's parent (:meth:`KVCache.reorder`).
    Hypotheses are ranked by log P(Y | X) / lp(Y) (:func:`gnmt_length_penalty` with
    ``alpha = length_penalty``; the paper uses K = 4, alpha = 0.6). A hypothesis that has
    produced EOS stays in the beam, unextended (padding, log-prob 0), competing with its
    final score. Stops when every kept hypothesis of every item has finished, or after
    ``max_len`` tokens. ``beam_size=1`` gives exactly :func:`greedy_decode`.

    Shape:
        src: (B, S) ids -> (B, <= max_len) ids after BOS, pad after EOS.
    """
    check_search(model, src, max_len, bos_id, eos_id)
    check_int(beam_size, "beam_size", 1)
    check_float(length_penalty, "length_penalty", 0.0)
    pad = model.config.pad_id
    with inference(model):
        src_mask = padding_mask(src, pad)                                    # (B, 1, 1, S)
        memory = cast(Tensor, model.encode(src, src_mask))                   # (B, S, D)
        beam = Beam(src.shape[0], beam_size, bos_id, eos_id, pad, length_penalty, src.device)
        memory = memory.repeat_interleave(beam_size, dim=0)                  # (B*K, S, D)
        src_mask = src_mask.repeat_interleave(beam_size, dim=0)              # (B*K, 1, 1, S)
        cache = model.new_cache() if use_cache else None
        for step in range(max_len):
            log_probs = next_log_probs(model, beam.tokens, memory, src_mask, cache)
            parents = beam.advance(log_probs, step + 1)                      # (B*K,) rows
            if cache is not None:
                cache.reorder(parents)             # each hypothesis keeps its parent's past
            if bool(beam.finished.all()):
                break
        return beam.best()                                                   # (B, <= max_len)


class Beam:
    """The state of a batched beam: tokens (B*K, t), scores, lengths, finished (B, K)."""

    def __init__(self, B: int, K: int, bos_id: int, eos_id: int, pad_id: int,
                 alpha: float, device: torch.device | str | None = None) -> None:
        self.B, self.K = check_int(B, "B (batch size)", 1), check_int(K, "K (beam size)", 1)
        self.eos, self.pad = check_int(eos_id, "eos_id", 0), check_int(pad_id, "pad_id", 0)
        if eos_id == pad_id:
            raise ValueError(f"eos_id must differ from pad_id, got {eos_id} for both")
        self.alpha = check_float(alpha, "alpha (length_penalty)", 0.0)
        self.tokens = torch.full((B * K, 1), check_int(bos_id, "bos_id", 0), dtype=torch.long,
                                 device=device)
        self.scores = torch.zeros(B, K, device=device)                       # sum of log-probs
        self.scores[:, 1:] = float("-inf")        # all K start equal: expand only the first
        self.lengths = torch.zeros(B, K, dtype=torch.long, device=device)
        self.finished = torch.zeros(B, K, dtype=torch.bool, device=device)

    def advance(self, log_probs: Tensor, length: int) -> Tensor:
        """Extend every hypothesis by every token, keep the K best per item.

        Returns the (B*K,) rows of the parents, to reorder the cache with.
        """
        B, K = self.B, self.K
        if not isinstance(log_probs, Tensor) or log_probs.dim() != 2 \
                or log_probs.shape[0] != B * K or not log_probs.is_floating_point():
            got = tuple(log_probs.shape) if isinstance(log_probs, Tensor) else type(log_probs)
            raise ValueError(f"log_probs must be a float tensor of shape (B*K, V) = ({B * K}, V),"
                             f" got {got}")
        log_probs = log_probs.view(B, K, -1)                                 # (B, K, V)
        V = log_probs.shape[-1]
        stay = torch.full_like(log_probs[0, 0], float("-inf"))
        stay[self.pad] = 0.0                                  # a finished hypothesis only pads
        log_probs = torch.where(self.finished[..., None], stay, log_probs)
        total = self.scores[..., None] + log_probs                           # (B, K, V)
        lengths = torch.where(self.finished, self.lengths, length)           # (B, K)
        ranked = total / gnmt_length_penalty(lengths, self.alpha)[..., None]  # (B, K, V)
        index = ranked.view(B, K * V).topk(K, dim=1).indices                 # (B, K)
        parent, token = index // V, index % V                                # (B, K) each
        self.scores = total.view(B, K * V).gather(1, index)                  # (B, K)
        self.lengths = lengths.gather(1, parent)
        self.finished = self.finished.gather(1, parent) | (token == self.eos)
        rows = (parent + torch.arange(B, device=parent.device)[:, None] * K).view(-1)
        self.tokens = torch.cat((self.tokens[rows], token.view(-1, 1)), dim=1)  # (B*K, t+1)
        return rows                                                          # (B*K,)

    def best(self) -> Tensor:
        """The best-ranked hypothesis of each item, without BOS or all-pad trailing columns."""
        ranked = self.scores / gnmt_length_penalty(self.lengths, self.alpha)  # (B, K)
        best = ranked.argmax(dim=1)                                          # (B,)
        tokens = self.tokens.view(self.B, self.K, -1)[torch.arange(self.B), best, 1:]
        keep = (tokens != self.pad).any(dim=0).nonzero()
        width = int(keep.max()) + 1 if keep.numel() else 0
        return tokens[:, :width]                                             # (B, <= max_len)


def translate(model: Transformer, tokenizer: Tokenizer, sentences: Sequence[str], beam: int = 1,
              length_penalty: float = 0.6, max_len: Optional[int] = None,
              batch_size: int = 64) -> List[str]:
    """Translate each sentence, in input order: greedy decoding (``beam=1``) or beam search
    (the paper's beam 4, α 0.6, §6.1). Sentences are batched by length (less padding); a
    source longer than the model's ``max_len`` is cut to it; a blank sentence gives "".
    ``max_len``: the longest output in tokens (default: the model's ``max_len``)."""
    if not isinstance(sentences, (list, tuple)) or not all(isinstance(s, str) for s in sentences):
        raise TypeError("sentences must be a list of str (one str: wrap it in a list)")
    if not isinstance(model, Transformer) or not isinstance(tokenizer, Tokenizer):
        raise TypeError(f"model and tokenizer must be a Transformer and a Tokenizer, got "
                        f"{type(model).__name__} and {type(tokenizer).__name__}")
    c = model.config
    max_len = c.max_len if max_len is None else check_int(max_len, "max_len", 1, c.max_len)
    check_int(beam, "beam", 1)
    check_int(batch_size, "batch_size", 1)
    device = next(model.parameters()).device
    ids = [tokenizer.encode(s)[: c.max_len] if s.strip() else [] for s in sentences]
    todo = sorted((i for i in range(len(ids)) if ids[i]), key=lambda i: len(ids[i]))
    out = [""] * len(ids)
    for start in range(0, len(todo), batch_size):
        rows = todo[start : start + batch_size]
        src = pad_rows([ids[i] for i in rows], c.pad_id).to(device)         # (B, S)
        bos, eos = tokenizer.bos_id, tokenizer.eos_id
        hyp = (greedy_decode(model, src, max_len, bos, eos) if beam == 1 else
               beam_search(model, src, max_len, beam, length_penalty, bos, eos))  # (B, <= max_len)
        for r, i in enumerate(rows):
            out[i] = tokenizer.decode(hyp[r].tolist())
    return out
