"""From the 2017 Transformer to today's models, on one task at one budget: English->French
as a prompted decoder-only language model against the encoder-decoder, then each change
since 2017 against the paper's choice.

    python benchmarks/modern.py                       # every model, seeds 0 and 1 (about 1.6 h, 2 cores)
    python benchmarks/modern.py --models enc-dec lm --seeds 0
    python benchmarks/modern.py --quick               # two models, 5 steps: a smoke test

The data and budget are those of ``benchmarks/table3.py``: the verses of ``bible-en-fr`` with
at most 15 words on both sides (5,099 training, 305 dev), a shared BPE vocabulary of 3,000,
1,000 steps over the same batches for every model (Adam, Eq. 3 with 300 warm-up steps and a
linear cool-down over the last 30 %, label smoothing 0.1, dropout 0.1).

* ``enc-dec``: Table 3's base (N = 2 + 2, d_model = 128, h = 8, d_ff = 512, pre-norm).
* ``lm``: a decoder-only model (``transformer_lib.lm``) of the same parameters to 0.1 %
  (N = 4, d_model = 128, h = 8, d_ff = 640), the paper's choices otherwise (post-norm, LayerNorm,
  ReLU, sinusoids, multi-head attention). It reads ``English <s> French </s>`` and learns to
  predict the French part; translating is continuing the prompt ``English <s>``.
* ``pre-norm``, ``rmsnorm``, ``swiglu``, ``rope``, ``gqa`` (2 key/value heads), ``mqa`` (1)
  and ``all`` (every change at once): ``lm`` with that change.

Scores on the dev verses: perplexity of the French tokens, BLEU of greedy translations,
parameters, key/value cache bytes per generated token. Speeds (training tokens per second,
generated tokens per second) are timed afterwards, all models interleaved round by round, so
that a busy machine slows them alike. Writes one JSON file and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import torch
import torch.nn.functional as F

from common import check_device, cpu_model, git_commit, results_file
from table3 import MAX_WORDS, N_VALID
from transformer_lib.batching import encode_pairs, pad_rows, token_batches
from transformer_lib.config import TransformerConfig
from transformer_lib.corpus import bible_en_fr
from transformer_lib.lm import LanguageModel, LMConfig, generate
from transformer_lib.model import Transformer
from transformer_lib.search import greedy_decode
from transformer_lib.tokenizers import BPETokenizer
from transformer_lib.training import bleu, noam_lr

ROOT = Path(__file__).resolve().parents[1]
D, H, FF, DROP, MAX_LEN = 128, 8, 512, 0.1, 128
LM_BASE = dict(N=4, d_model=D, h=H, d_ff=640, P_drop=DROP, max_len=2 * MAX_LEN)
MODELS: Dict[str, dict] = {  # name -> the LMConfig fields it changes (enc-dec: its own)
    "enc-dec": {},
    "lm": {},
    "pre-norm": {"norm_first": True},
    "rmsnorm": {"norm_first": True, "norm": "rms"},
    "swiglu": {"ffn": "swiglu", "d_ff": 428},  # 2/3 of 640 (and the biases): equal parameters
    "rope": {"positions": "rope"},
    "gqa": {"kv_heads": 2},
    "mqa": {"kv_heads": 1},
    "all": {"norm_first": True, "norm": "rms", "ffn": "swiglu", "d_ff": 428, "positions": "rope",
            "kv_heads": 2},
}  # fmt: skip


def build(name: str, vocab: int) -> torch.nn.Module:
    if name == "enc-dec":
        return Transformer(TransformerConfig(vocab, vocab, N=2, d_model=D, h=H, d_ff=FF,
                                             P_drop=DROP, max_len=MAX_LEN, norm_first=True,
                                             tie_embeddings=True))  # fmt: skip
    return LanguageModel(LMConfig(vocab, **{**LM_BASE, **MODELS[name]}))


def lm_rows(examples: list, rows: List[int], bos: int, eos: int) -> tuple:
    """``English <s> French </s>`` rows: inputs, next tokens, and which next tokens are French
    (the loss and the scores read those only)."""
    seqs = [examples[i][0] + [bos] + examples[i][1] + [eos] for i in rows]
    french = [[0] * len(examples[i][0]) + [1] * (len(examples[i][1]) + 1) for i in rows]
    ids = pad_rows(seqs)
    return ids[:, :-1], ids[:, 1:], pad_rows(french).bool()  # french[j]: is s[j + 1] French?


def loss_of(model: torch.nn.Module, examples: list, batch, tok, smoothing: float) -> tuple:
    """(loss, French tokens) of one batch, the same targets for both kinds of model."""
    if isinstance(model, Transformer):
        logits, target, keep = model(batch.src, batch.tgt_in), batch.tgt_out, batch.tgt_out != 0
    else:
        x, target, keep = lm_rows(examples, batch.indices, tok.bos_id, tok.eos_id)
        logits = model(x)
    loss = F.cross_entropy(logits[keep], target[keep], label_smoothing=smoothing, reduction="sum")
    return loss, int(keep.sum())


def train(name: str, seed: int, steps: int, tok, examples: list) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = build(name, tok.vocab_size)
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    model.train()
    step, epoch = 0, 0
    while step < steps:
        for batch in token_batches(examples, 1500, seed=seed + epoch):
            step += 1
            cool = min(1.0, (steps - step + 1) / (0.3 * steps))
            for group in opt.param_groups:
                group["lr"] = noam_lr(step, D, warmup=300, factor=0.8) * cool
            loss, tokens = loss_of(model, examples, batch, tok, 0.1)
            opt.zero_grad(set_to_none=True)
            (loss / tokens).backward()
            opt.step()
            if step == steps:
                break
        epoch += 1
    return model.eval()


def cut(row: List[int], eos: int) -> List[int]:
    """The tokens of an output up to and with its first </s>."""
    return row[: row.index(eos) + 1] if eos in row else row


def greedy_translations(
    model: torch.nn.Module, tok, sources: List[str], most: int = MAX_LEN
) -> tuple:
    """Greedy outputs of either kind of model, and the tokens generated (</s> included):
    the encoder-decoder decodes padded batches; the language model continues the prompts
    ``English <s>``, prompts of one length batched together; at most ``most`` tokens each."""
    if isinstance(model, Transformer):
        prompts = [tok.encode(s)[:MAX_LEN] for s in sources]
    else:
        prompts = [tok.encode(s)[: MAX_LEN - 1] + [tok.bos_id] for s in sources]
    groups: Dict[int, List[int]] = {}
    for i, p in enumerate(prompts):
        groups.setdefault(len(p), []).append(i)  # the same groups for both kinds of model
    outputs, made = [""] * len(prompts), 0
    for rows in groups.values():
        if isinstance(model, Transformer):
            src = pad_rows([prompts[i] for i in rows])
            new = greedy_decode(model, src, most, tok.bos_id, tok.eos_id).tolist()
        else:
            ids = generate(model, torch.tensor([prompts[i] for i in rows]), most,
                           temperature=0, eos_id=tok.eos_id)  # fmt: skip
            new = [row[len(prompts[i]) :] for i, row in zip(rows, ids.tolist())]
        for i, row in zip(rows, new):
            row = cut(row, tok.eos_id)
            outputs[i], made = tok.decode(row), made + len(row)
    return outputs, made


def cache_bytes_per_token(model: torch.nn.Module) -> int:
    """What the key/value cache grows by per generated token, in float32: the encoder-decoder
    caches its decoder's self-attention (its cross-attention keys are the source's, once)."""
    c = model.config
    if isinstance(model, Transformer):
        return c.N * 2 * c.d_model * 4
    return c.N * 2 * c.heads_kv * (c.d_model // c.h) * 4


def score(model, tok, examples: list, pairs: list, most: int = MAX_LEN) -> dict:
    total, tokens = 0.0, 0
    with torch.no_grad():
        for batch in token_batches(examples, 3000, shuffle=False):
            loss, n = loss_of(model, examples, batch, tok, 0.0)
            total, tokens = total + loss.item(), tokens + n
    outputs, _ = greedy_translations(model, tok, [s for s, _ in pairs], most)
    return {"ppl": math.exp(total / tokens), "bleu": bleu(outputs, [t for _, t in pairs]),
            "params": sum(p.numel() for p in model.parameters()),
            "cache_bytes_per_token": cache_bytes_per_token(model)}  # fmt: skip


def speeds(models: Dict[str, torch.nn.Module], tok, examples: list, pairs: list,
           rounds: int, most: int = MAX_LEN) -> Dict[str, dict]:  # fmt: skip
    """Training tokens (French) per second and generated tokens per second, the models
    timed in turn, round after round (the order rotated), medians kept."""
    batches = token_batches(examples, 1500, seed=0)[:3]
    sources = [s for s, _ in pairs[:32]]
    times: Dict[str, Dict[str, list]] = {n: {"train": [], "gen": []} for n in models}
    names = list(models)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            model = models[name].train()
            start, n = time.perf_counter(), 0
            for b in batches:
                loss, tokens = loss_of(model, examples, b, tok, 0.1)
                (loss / tokens).backward()
                n += tokens
            model.zero_grad(set_to_none=True)
            times[name]["train"].append(n / (time.perf_counter() - start))
            model.eval()
            start = time.perf_counter()
            made = greedy_translations(model, tok, sources, most)[1]
            times[name]["gen"].append(made / (time.perf_counter() - start))
    return {n: {"train_tokens_per_s": statistics.median(t["train"]),
                "gen_tokens_per_s": statistics.median(t["gen"])} for n, t in times.items()}  # fmt: skip


def cell(values: List[float], digits: int) -> str:
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return (f"{statistics.mean(values):.{digits}f} "
            f"({min(values):.{digits}f}-{max(values):.{digits}f})")  # fmt: skip


def parse(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=5, help="rounds of the speed timing")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu", help="cpu only: the speeds are a laptop's")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the JSON file (default benchmarks/modern.json; --quick: a temporary one)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="enc-dec and lm; 5 steps, seed 0, 10 verses, outputs of 20 tokens",
    )
    args = p.parse_args(argv)  # fmt: skip
    results_file(p, args, "modern.json", ("steps", "threads", "rounds"))
    if check_device(args.device).type != "cpu":
        p.error("--device: the comparison is of CPU speeds; run it on the CPU")
    if args.quick:
        args.models, args.seeds, args.steps, args.rounds = ["enc-dec", "lm"], [0], 5, 1
    args.most = 20 if args.quick else MAX_LEN  # the longest output, in tokens
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    commit = git_commit(ROOT)  # the code the runs start from
    start = time.perf_counter()
    splits = bible_en_fr(max_words=MAX_WORDS, n_valid=N_VALID, n_test=0)
    pairs = splits["valid"][: 10 if args.quick else None]
    tok = BPETokenizer.train([t for pair in splits["train"] for t in pair], vocab_size=3000)
    examples, dev = encode_pairs(splits["train"], tok), encode_pairs(pairs, tok)
    runs, last = [], {}

    def run(name: str, seed: int, steps: int, label: str) -> None:
        began = time.perf_counter()
        model = train(name, seed, steps, tok, examples)
        seconds = time.perf_counter() - began
        runs.append({"model": label, "seed": seed, "steps": steps, "train_seconds": seconds,
                     **score(model, tok, dev, pairs, args.most)})  # fmt: skip
        last[label] = model
        print(f"{label:18} seed {seed}: ppl {runs[-1]['ppl']:.2f}  BLEU {runs[-1]['bleu']:.1f}  "
              f"({seconds:.0f} s training)", flush=True)  # fmt: skip

    for name in args.models:
        for seed in args.seeds:
            run(name, seed, args.steps, name)
    speed = speeds(last, tok, examples, pairs, args.rounds, args.most)
    if {"enc-dec", "lm"} <= set(last):  # the language model for the encoder-decoder's time
        ratio = speed["lm"]["train_tokens_per_s"] / speed["enc-dec"]["train_tokens_per_s"]
        for seed in args.seeds:
            run("lm", seed, max(1, round(args.steps * ratio)), "lm, equal time")
        speed["lm, equal time"] = speed["lm"]
    record = {"machine": f"{cpu_model()} ({torch.backends.cpu.get_cpu_capability()})",
              "torch": torch.__version__, "commit": commit, "threads": args.threads,
              "command": "python benchmarks/modern.py " + " ".join(argv or sys.argv[1:]),
              "steps": args.steps, "seeds": args.seeds, "dev_verses": len(pairs),
              "seconds": time.perf_counter() - start, "runs": runs, "speeds": speed}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"\n{record['machine']}, {args.steps} steps, seeds {args.seeds}: {args.out}\n")
    print(
        "| model | params | dev ppl (French) | BLEU greedy | cache bytes / token "
        "| train tokens/s | generated tokens/s |\n|---|--:|--:|--:|--:|--:|--:|"
    )
    for name in dict.fromkeys(r["model"] for r in runs):
        mine = [r for r in runs if r["model"] == name]
        print(f"| {name} ({mine[0]['steps']} steps) | {mine[0]['params']:,} | {cell([r['ppl'] for r in mine], 2)} "
              f"| {cell([r['bleu'] for r in mine], 1)} | {mine[0]['cache_bytes_per_token']:,} "
              f"| {speed[name]['train_tokens_per_s']:,.0f} | {speed[name]['gen_tokens_per_s']:,.0f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
