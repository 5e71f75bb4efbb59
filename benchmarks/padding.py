"""What padding costs a training step, and where it is best removed.

For batches with more and more padding (each row keeps between a share of the length L and
all of it), three transformer_lib training steps (forward, loss, backward, Adam; fp32),
interleaved:

* **padded**: the batch as it is (the model computes every position; 0.75 is the batch
  of ``workload.py``);
* **packed**: the same batch with padded positions skipped everywhere but in attention
  (:func:`packed_forward`): the same loss and gradients. A measurement, not a path of the
  library;
* **no padding**: as many rows, each as long as the batch's mean real length, so about the
  same number of real tokens and no padding: the most that skipping padding can save.

Then the padding in the batches the trainer trains on: ``token_batches`` (length-sorted)
against batches of the same sizes drawn in random order, on the date task.

    python benchmarks/padding.py            # d_model 256, 3+3 layers (about 1 minute)
    python benchmarks/padding.py --quick    # smoke test
"""

from __future__ import annotations

import random
import sys
from typing import List, Optional, Tuple

import torch
from torch import nn

import common
from transformer_lib.attention import MultiHeadAttention, fused_attention
from transformer_lib.batching import encode_pairs, make_batch as pad_examples, token_batches
from transformer_lib.config import TransformerConfig
from transformer_lib.dates import make_date_splits
from transformer_lib.masks import causal_mask
from transformer_lib.model import Transformer
from transformer_lib.tokenizers import PAD_ID, CharTokenizer
from workload import PRESETS, QUICK, make_batch, train_step_fn

Tensor = torch.Tensor


def packed_attention(
    attn: MultiHeadAttention,
    x: Tensor,
    rows: Tensor,
    B: int,
    T: int,
    mask: Tensor,
    memory: Optional[Tensor] = None,
    memory_rows: Optional[Tensor] = None,
    S: int = 0,
) -> Tensor:
    """``attn`` on packed rows: x (n, D) holds the real positions ``rows`` of a (B, T) batch.

    Queries, keys and values are projected for the real rows only, scattered into the
    padded layout (zeros at padded positions, which the mask hides as keys) for the
    attention kernel, and the output is gathered back to the real rows: (n, D).
    """
    D, heads = attn.d_model, attn.split_heads  # (B, L, D) -> (B, H, L, d_k)

    def padded(t: Tensor, idx: Tensor, length: int) -> Tensor:  # (n, k D) -> (B, length, k D)
        return t.new_zeros(B * length, t.shape[1]).index_copy(0, idx, t).view(B, length, -1)

    if memory is None:
        q, k, v = padded(attn.in_proj(x), rows, T).split(D, dim=-1)
    else:
        w_q, w_kv = attn.in_proj.weight.split((D, 2 * D))
        b_q, b_kv = attn.in_proj.bias.split((D, 2 * D))
        q = padded(nn.functional.linear(x, w_q, b_q), rows, T)
        k, v = padded(nn.functional.linear(memory, w_kv, b_kv), memory_rows, S).split(D, -1)
    out = fused_attention(heads(q), heads(k), heads(v), mask)  # (B, H, T, d_k)
    return attn.out_proj(out.transpose(1, 2).reshape(B * T, D).index_select(0, rows))


def packed_forward(model: Transformer, src: Tensor, tgt: Tensor) -> Tensor:
    """``model(src, tgt)`` with padded positions skipped outside attention.

    The residual stream is (real tokens, D) from the embeddings to the output layer; only
    attention sees the padded (B, L) layout. Logits at padded target positions are 0
    (``model`` computes them, and the loss ignores them). Default masks only (from
    ``pad_id``).
    """
    c = model.config
    (B, S), T = src.shape, tgt.shape[1]
    src_real, tgt_real = src != c.pad_id, tgt != c.pad_id  # (B, S), (B, T)
    src_rows = src_real.flatten().nonzero().squeeze(1)  # (n_src,)
    tgt_rows = tgt_real.flatten().nonzero().squeeze(1)  # (n_tgt,)
    src_mask = src_real[:, None, None, :]  # (B, 1, 1, S)
    tgt_mask = tgt_real[:, None, None, :] & causal_mask(T, tgt.device)  # (B, 1, T, T)

    def embed(embedding: nn.Module, ids: Tensor, rows: Tensor, length: int) -> Tensor:
        pe = model.positions.pe[rows % length]  # (n, D): row i is at i % L
        tokens = embedding(ids.flatten()[rows][None])[0]  # (n, D): one row of n ids
        return model.positions.dropout(tokens + pe)  # (n, D)

    x = embed(model.src_embed, src, src_rows, S)
    for layer in model.encoder.layers:
        x = layer.attn_block(
            x, lambda y: packed_attention(layer.self_attn, y, src_rows, B, S, src_mask)
        )
        x = layer.ff_block(x, layer.feed_forward)
    memory = model.encoder.norm(x)
    y = embed(model.tgt_embed, tgt, tgt_rows, T)
    for layer in model.decoder.layers:
        y = layer.self_block(
            y, lambda z: packed_attention(layer.self_attn, z, tgt_rows, B, T, tgt_mask)
        )
        y = layer.cross_block(
            y,
            lambda z: packed_attention(
                layer.cross_attn, z, tgt_rows, B, T, src_mask, memory, src_rows, S
            ),
        )
        y = layer.ff_block(y, layer.feed_forward)
    logits = model.generator(model.decoder.norm(y))  # (n_tgt, V)
    full = logits.new_zeros(B * T, logits.shape[1]).index_copy(0, tgt_rows, logits)
    return full.view(B, T, -1)  # (B, T, V)


class PackedTransformer(Transformer):
    """A :class:`Transformer` whose forward pass is :func:`packed_forward`."""

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:  # type: ignore[override]
        return packed_forward(self, src, tgt)


def padded_batch(
    c: TransformerConfig,
    batch: int,
    length: int,
    shortest: float,
    device: torch.device,
    gen: torch.Generator,
) -> Tuple[Tensor, Tensor]:
    """Source (B, length) and target (B, length + 1) ids as in ``workload.py``, each
    row keeping between ``shortest`` x the length and all of it."""
    src, tgt = make_batch(c, batch, length + 1, device, gen, shortest)
    return src[:, :length], tgt


def step_table(name: str, preset, args, device: torch.device) -> str:
    batch, length = preset.batch, preset.length
    c = TransformerConfig.tiny(
        args.vocab or preset.vocab, max_len=max(128, length + 1), **preset.sizes
    )
    gen = torch.Generator().manual_seed(args.seed)
    rows = []
    for shortest in args.shortest:
        src, tgt = padded_batch(c, batch, length, shortest, device, gen)
        real = int((src != c.pad_id).sum() + (tgt[:, :-1] != c.pad_id).sum())
        pad = 1 - real / (src.numel() + tgt[:, :-1].numel())
        even = max(1, round(real / (2 * batch)))  # same real tokens, no padding
        unpadded = padded_batch(c, batch, even, 1.0, device, gen)
        cases = {
            "padded": (Transformer, src, tgt),
            "packed": (PackedTransformer, src, tgt),
            "no padding": (Transformer, *unpadded),
        }
        fns = {}
        for label, (make, s, t) in cases.items():
            torch.manual_seed(args.seed)
            model = make(c).to(device).train()
            fns[label] = train_step_fn(model, s, t, c.pad_id, False, device, True)
        times = common.interleaved(fns, device, args.reps, warmup=1 if args.quick else 2)
        ms = {label: 1e3 * common.median(ts) for label, ts in times.items()}
        rows.append(
            [
                f"{shortest:g}",
                f"{pad:.0%}",
                f"{ms['padded']:.1f}",
                f"{ms['packed']:.1f}",
                f"{ms['padded'] / ms['packed']:.2f}x",
                f"{batch} x {even}",
                f"{ms['no padding']:.1f}",
                f"{ms['padded'] / ms['no padding']:.2f}x",
            ]
        )
    return common.table(
        [
            "shortest row / L",
            "padding",
            "padded ms",
            "packed ms",
            "packed speed-up",
            "no padding: rows x L",
            "no padding ms",
            "speed-up",
        ],
        rows,
        f"Training step, {name}, fp32, batch {batch} x {length} (L): median of {args.reps}, "
        f"interleaved",
    )


def padding_share(batches: List) -> str:
    """Share of padding in the sources and in the decoder inputs of ``batches``."""

    def share(key: str) -> float:
        pads = sum(int((getattr(b, key) == PAD_ID).sum()) for b in batches)
        return pads / sum(getattr(b, key).numel() for b in batches)

    return f"{share('src'):.1%} / {share('tgt_in'):.1%}"


def trainer_table(args) -> str:
    pairs = make_date_splits(n_train=2000 if args.quick else 20000, n_valid=10, n_test=10)["train"]
    tokenizer = CharTokenizer.train([s for s, _ in pairs] + [t for _, t in pairs])
    examples = encode_pairs(pairs, tokenizer)
    order = list(range(len(examples)))
    random.Random(args.seed).shuffle(order)
    rows = []
    for max_tokens in (1000, 2000, 4096):
        sorted_batches = token_batches(examples, max_tokens, seed=args.seed)
        random_batches, start = [], 0
        for b in sorted_batches:  # the same batch sizes
            random_batches.append(
                pad_examples([examples[i] for i in order[start : start + len(b)]])
            )
            start += len(b)
        rows.append(
            [
                max_tokens,
                len(sorted_batches),
                padding_share(sorted_batches),
                padding_share(random_batches),
            ]
        )
    return common.table(
        ["max_tokens", "batches", "length-sorted (token_batches)", "random order, same sizes"],
        rows,
        f"Padding share, source / decoder input, of the date task's "
        f"{len(examples):,} training pairs",
    )


def main(argv: Optional[List[str]] = None) -> int:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=None, help="timed repetitions (default 11)")
    p.add_argument("--vocab", type=int, default=None, help="default: the preset's (1000)")
    p.add_argument(
        "--shortest",
        type=float,
        nargs="+",
        default=[1.0, 0.75, 0.5, 0.25],
        help="shortest row as a share of the length, one table row each "
        "(0.75: the batch of workload.py)",
    )
    args = p.parse_args(argv)
    device = common.setup(args)
    args.reps = args.reps or (1 if args.quick else 11)
    name, preset = next(iter((QUICK if args.quick else {"d256": PRESETS["d256"]}).items()))
    print(step_table(name, preset, args, device))
    print(trainer_table(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
