"""Greedy decoding with the key/value cache against without, at several output lengths.

Without a cache every step runs the decoder over the whole prefix again (quadratic work in
the output length); with :class:`transformer_lib.decoder.KVCache` each step feeds only the
newest token. To make every output exactly the requested length, the timed loop is
``greedy_decode``'s with decoding's own step (``transformer_lib.search.next_log_probs``)
but no stop at EOS. The last column is the memory the cache holds at the end
(``KVCache.nbytes()``): every layer's keys and values of the output so far, and of the
source for cross-attention.

    python benchmarks/decode_cache.py            # 32, 128 and 512 tokens
    python benchmarks/decode_cache.py --quick    # smoke test
"""

from __future__ import annotations

import sys
from typing import List, Optional, Tuple

import torch

import common
from transformer_lib.config import TransformerConfig
from transformer_lib.decoder import KVCache
from transformer_lib.masks import padding_mask
from transformer_lib.model import Transformer
from transformer_lib.search import inference, next_log_probs


def fixed_length_greedy(
    model: Transformer, src: torch.Tensor, length: int, use_cache: bool
) -> Tuple[torch.Tensor, Optional[KVCache]]:
    """``greedy_decode``'s loop with decoding's own step (``next_log_probs``, with or
    without ``new_cache()``), for exactly ``length`` tokens: no stop at EOS. Returns the
    tokens after BOS (B, length) and the cache (or None)."""
    with inference(model):
        src_mask = padding_mask(src, model.config.pad_id)  # (B, 1, 1, S)
        memory = model.encode(src, src_mask)  # (B, S, D)
        ys = torch.ones(src.shape[0], 1, dtype=torch.long, device=src.device)  # BOS = 1
        cache = model.new_cache() if use_cache else None
        for _ in range(length):
            token = next_log_probs(model, ys, memory, src_mask, cache).argmax(-1)  # (B,)
            ys = torch.cat((ys, token[:, None]), dim=1)  # (B, t + 1)
    return ys[:, 1:], cache


def main(argv: Optional[List[str]] = None) -> int:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[32, 128, 512])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--src-len", type=int, default=32)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--vocab", type=int, default=1000)
    args = p.parse_args(argv)
    device = common.setup(args)
    if args.quick:
        lengths, reps, batch = [4, 8], 1, 2
        args.src_len = 6
        c = TransformerConfig.tiny(64, N=1, d_model=16, d_ff=32, h=2, max_len=16)
    else:
        lengths, reps, batch = args.lengths, args.reps, args.batch
        c = TransformerConfig.tiny(
            args.vocab, N=3, d_model=256, d_ff=1024, h=4, max_len=max(lengths) + 1
        )
    model = Transformer(c).to(device).eval()
    src = torch.randint(4, c.src_vocab_size, (batch, args.src_len), device=device)
    rows = []
    for length in lengths:
        outputs = {}

        def decode(use_cache: bool, name: str):
            return lambda: outputs.setdefault(
                name, fixed_length_greedy(model, src, length, use_cache)
            )

        fns = {"cache": decode(True, "cache"), "no cache": decode(False, "no cache")}
        fixed_length_greedy(model, src, length, True)  # warm-up (short)
        # the no-cache runs at 512 tokens take tens of seconds: one repetition there
        times = common.interleaved(fns, device, reps=reps if length <= 128 else 1, warmup=0)
        (cached, cache), (uncached, _) = outputs["cache"], outputs["no cache"]
        assert cached.shape == (batch, length), (cached.shape, length)
        t_c, t_n = common.median(times["cache"]), common.median(times["no cache"])
        rows.append(
            [
                length,
                f"{1e3 * t_n:,.0f}",
                f"{1e3 * t_c:,.0f}",
                f"{batch * length / t_c:,.0f}",
                f"{t_n / t_c:.1f}x",
                "yes" if torch.equal(cached, uncached) else "NO",
                f"{cache.nbytes() / 2**10:,.0f}",
            ]
        )
    print(
        common.table(
            [
                "output tokens",
                "no cache ms",
                "cache ms",
                "cache tokens/s",
                "speed-up",
                "same tokens",
                "cache KiB",
            ],
            rows,
            f"Greedy decoding, batch {batch}, source {args.src_len} tokens, d_model {c.d_model}, "
            f"{c.N}+{c.N} layers, fp32, median of {reps} (one run above 128 tokens)",
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
