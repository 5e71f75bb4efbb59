"""Greedy decoding with the key/value cache against without, at several output lengths.

Without a cache every step runs the decoder over the whole prefix again (quadratic work in
the output length); with :class:`transformer_lib.KVCache` each step feeds only the newest
token. To make every output exactly the requested length, the timed loop is
``greedy_decode``'s with decoding's own step (``transformer_lib.search.next_log_probs``)
but no stop at EOS.

    python benchmarks/decode_cache.py            # 32, 128 and 512 tokens
    python benchmarks/decode_cache.py --quick    # smoke test
"""

from __future__ import annotations

import torch

import common
from transformer_lib import Transformer, TransformerConfig
from transformer_lib.search import inference, next_log_probs, source_memory


def decoder_fn(model: Transformer, src: torch.Tensor, length: int, use_cache: bool):
    """A closure producing exactly ``length`` tokens greedily."""

    def run() -> torch.Tensor:
        out = fixed_length_greedy(model, src, length, use_cache)
        assert out.shape[1] == length, (out.shape, length)
        return out

    return run


def fixed_length_greedy(
    model: Transformer, src: torch.Tensor, length: int, use_cache: bool
) -> torch.Tensor:
    """``greedy_decode``'s loop with decoding's own step (``next_log_probs``, with or
    without ``new_cache()``), for exactly ``length`` tokens: no stop at EOS."""
    with inference(model):
        memory, src_mask = source_memory(model, src, None)  # (B, S, D)
        ys = torch.ones(src.shape[0], 1, dtype=torch.long, device=src.device)  # BOS = 1
        cache = model.new_cache() if use_cache else None
        for _ in range(length):
            token = next_log_probs(model, ys, memory, src_mask, cache).argmax(-1)  # (B,)
            ys = torch.cat((ys, token[:, None]), dim=1)  # (B, t + 1)
    return ys[:, 1:]


def main() -> None:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[32, 128, 512])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--src-len", type=int, default=32)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--vocab", type=int, default=1000)
    args = p.parse_args()
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
    src = torch.randint(3, c.src_vocab_size, (batch, args.src_len), device=device)
    rows = []
    for length in lengths:
        with_cache = decoder_fn(model, src, length, use_cache=True)
        without = decoder_fn(model, src, length, use_cache=False)
        outputs = {}
        fns = {
            "cache": lambda: outputs.setdefault("cache", with_cache()),
            "no cache": lambda: outputs.setdefault("no cache", without()),
        }
        with_cache()  # warm-up (short)
        # the no-cache runs at 512 tokens take tens of seconds: one repetition there
        times = common.interleaved(fns, device, reps=reps if length <= 128 else 1, warmup=0)
        same = torch.equal(outputs["cache"], outputs["no cache"])
        t_c, t_n = common.median(times["cache"]), common.median(times["no cache"])
        rows.append(
            [
                length,
                f"{1e3 * t_n:,.0f}",
                f"{1e3 * t_c:,.0f}",
                f"{batch * length / t_c:,.0f}",
                f"{t_n / t_c:.1f}x",
                "yes" if same else "NO",
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
            ],
            rows,
            f"Greedy decoding, batch {batch}, source {args.src_len} tokens, d_model {c.d_model}, "
            f"{c.N}+{c.N} layers, median of {reps} (one run above 128 tokens)",
        )
    )


if __name__ == "__main__":
    main()
