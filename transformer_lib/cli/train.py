"""Train a Transformer from the command line: ``python -m transformer_lib.train``.

Examples::

    # the built-in date task, a small model, on this machine's CPU or GPU
    python -m transformer_lib.train --task dates --steps 3000 --out runs/dates
    # a parallel corpus (one "source<TAB>target" pair a line), BPE vocabulary of 8000
    python -m transformer_lib.train --train-file train.tsv --valid-file valid.tsv \\
        --vocab-size 8000 --preset base --steps 100000 --max-tokens 25000 --out runs/base
    # two processes on one machine (DDP; gloo on CPU, NCCL on GPUs)
    torchrun --nproc_per_node=2 -m transformer_lib.train --task dates --out runs/ddp
    # without the compiled CPU kernels (used by default where a C++ compiler can build them)
    python -m transformer_lib.train --task dates --out runs/plain --no-compiled-kernels
    # continue a run where it stopped
    python -m transformer_lib.train --task dates --steps 6000 --out runs/dates --resume
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import random
import shlex
import sys
import time
from pathlib import Path
from typing import List, Optional

import numpy as np
import torch

from .. import fast
from ..config import TransformerConfig
from ..model import Transformer
from ..training.checkpoint import load_checkpoint
from ..training.distributed import cleanup, init_distributed
from ..training.metrics import evaluate_translation
from ..training.precision import bf16_problem
from ..training.trainer import Trainer, TrainSettings, pick_device
from .args import non_negative_int, positive_int

PRESETS = {"tiny": TransformerConfig.tiny, "base": TransformerConfig.base,
           "big": TransformerConfig.big}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m transformer_lib.train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    data = p.add_argument_group("data")
    data.add_argument("--task", choices=["dates"], help="a built-in task")
    data.add_argument("--train-file", type=Path, help="TSV corpus: source<TAB>target lines")
    data.add_argument("--valid-file", type=Path, help="TSV corpus for validation")
    data.add_argument("--test-file", type=Path, help="TSV corpus scored once at the end")
    data.add_argument("--vocab-size", type=positive_int, default=8000,
                      help="BPE vocabulary shared by source and target (corpus only)")
    data.add_argument("--n-train", type=positive_int, default=20000,
                      help="training pairs of the date task")
    data.add_argument("--n-valid", type=positive_int, default=1000,
                      help="validation pairs of the date task")
    data.add_argument("--n-test", type=positive_int, default=1000,
                      help="test pairs of the date task")
    model = p.add_argument_group("model (ignored with --resume: the checkpoint's is used)")
    model.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    model.add_argument("--d-model", type=positive_int)
    model.add_argument("--layers", type=positive_int, help="N, in encoder and decoder")
    model.add_argument("--heads", type=positive_int, help="h")
    model.add_argument("--d-ff", type=positive_int)
    model.add_argument("--dropout", type=float, help="P_drop")
    model.add_argument("--max-len", type=positive_int, help="longest sequence (positions)")
    train = p.add_argument_group("training")
    train.add_argument("--steps", type=positive_int, default=2000, help="total steps")
    train.add_argument("--max-tokens", type=positive_int, default=2000,
                       help="tokens per batch (per process)")
    train.add_argument("--warmup", type=positive_int, default=400)
    train.add_argument("--lr-factor", type=float, default=1.0)
    train.add_argument("--label-smoothing", type=float, default=0.1)
    train.add_argument("--eval-every", type=non_negative_int, default=0,
                       help="validate every N steps (0: at the end only)")
    train.add_argument("--eval-limit", type=positive_int, default=500,
                       help="validation pairs decoded for exact match and BLEU")
    train.add_argument("--save-every", type=non_negative_int, default=0,
                       help="checkpoint every N steps (0: at the end only)")
    train.add_argument("--average-last", type=non_negative_int, default=0,
                       help="final model = mean of the last K snapshots (paper: 5, §6.1)")
    train.add_argument("--average-every", type=positive_int, default=100,
                       help="steps between those snapshots")
    train.add_argument("--out", type=Path, required=True, help="output folder")
    train.add_argument("--name", default="checkpoint.pt", help="checkpoint file in --out")
    train.add_argument("--resume", action="store_true", help="continue --out/--name")
    train.add_argument("--force", action="store_true", help="overwrite an existing checkpoint")
    train.add_argument("--bf16", action="store_true", help="bfloat16 autocast")
    train.add_argument("--compiled-kernels", action=argparse.BooleanOptionalAction,
                       help="CPU dropout masks, the feed-forward layer and attention through "
                            "compiled kernels: the same masks, faster steps (built on first "
                            "use, ~30 s, then cached; see transformer_lib.fast). "
                            "Default: on when training on a CPU and a C++ compiler can build "
                            "them, else off; --compiled-kernels: on, or stop if they cannot be "
                            "built")
    train.add_argument("--keep-freed-memory", action=argparse.BooleanOptionalAction,
                       default=True,
                       help="Linux with glibc: malloc keeps what a step frees for the next step "
                            "instead of handing it back to the OS (fewer page faults; default). "
                            "Results are the same either way")
    train.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: cuda if available)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--threads", type=positive_int, help="torch.set_num_threads")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def check_args(p: argparse.ArgumentParser, args) -> Path:
    """Reject contradictory or impossible arguments; return the checkpoint path."""
    if (args.task is None) == (args.train_file is None):
        p.error("give either --task dates or --train-file/--valid-file (not both)")
    if args.train_file is not None and args.valid_file is None:
        p.error("--train-file needs --valid-file")
    for flag in ("train_file", "valid_file", "test_file"):
        path = getattr(args, flag)
        if path is not None and not path.is_file():
            p.error(f"--{flag.replace('_', '-')}: no such file: {path}")
    if args.dropout is not None and not 0.0 <= args.dropout < 1.0:
        p.error(f"--dropout must be in [0, 1), got {args.dropout}")
    if not 0.0 <= args.label_smoothing < 1.0:
        p.error(f"--label-smoothing must be in [0, 1), got {args.label_smoothing}")
    if args.lr_factor <= 0:
        p.error(f"--lr-factor must be positive, got {args.lr_factor}")
    device = check_device(p, args.device)
    if args.bf16 and (problem := bf16_problem(device)):
        p.error(f"--bf16: {problem}. Train in fp32 (leave out --bf16), or on a GPU")
    path = args.out / args.name
    if args.resume and not path.is_file():
        p.error(f"--resume: no checkpoint to resume at {path}")
    if path.exists() and not (args.resume or args.force):
        p.error(f"{path} already exists: pass --resume to continue it or --force to "
                "overwrite it")
    return path


def check_device(p: argparse.ArgumentParser, name: Optional[str]) -> torch.device:
    """The device of --device (default: CUDA when available), or a usage error saying why
    it cannot be used."""
    try:
        device = pick_device(name)
    except (RuntimeError, ValueError) as e:
        p.error(f"--device: {name!r} is not a device PyTorch knows ({str(e).splitlines()[0]}); "
                "use cpu, cuda or cuda:N")
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            p.error(f"--device {name}: this machine has no CUDA GPU that PyTorch can use "
                    f"(torch {torch.__version__}); leave out --device to train on the CPU")
        if device.index is not None and device.index >= count:
            p.error(f"--device {name}: there are {count} CUDA devices (cuda:0 .. "
                    f"cuda:{count - 1})")
    return device


def load_data(args):
    """-> (train pairs, valid pairs, test pairs or None, BLEU tokenization)."""
    if args.task == "dates":
        from ..data.dates import make_date_splits
        splits = make_date_splits(args.n_train, args.n_valid, args.n_test)
        return splits["train"], splits["valid"], splits["test"], "char"
    from ..data.corpus import read_parallel
    test = read_parallel(args.test_file) if args.test_file else None
    return read_parallel(args.train_file), read_parallel(args.valid_file), test, "13a"


def new_tokenizer(args, train_pairs):
    """One vocabulary shared by source and target (§5.1), so embeddings can be tied."""
    from ..data.tokenizers import BPETokenizer, CharTokenizer
    texts = [s for s, _ in train_pairs] + [t for _, t in train_pairs]
    if args.task == "dates":
        return CharTokenizer.train(texts)
    return BPETokenizer.train(texts, vocab_size=args.vocab_size)


def model_config(args, vocab_size: int) -> TransformerConfig:
    sizes = {"d_model": args.d_model, "N": args.layers, "h": args.heads, "d_ff": args.d_ff,
             "P_drop": args.dropout, "max_len": args.max_len}
    return PRESETS[args.preset](vocab_size, **{k: v for k, v in sizes.items() if v is not None})


def build(args, ckpt_path: Path, train_pairs):
    """-> (model, src tokenizer, tgt tokenizer): from the checkpoint with --resume."""
    from ..data.tokenizers import tokenizer_from_dict
    if args.resume:
        ckpt = load_checkpoint(ckpt_path)
        config = TransformerConfig(**ckpt["config"])
        src_tok = tokenizer_from_dict(ckpt["src_tokenizer"])
        return Transformer(config), src_tok, tokenizer_from_dict(ckpt["tgt_tokenizer"])
    tok = new_tokenizer(args, train_pairs)
    return Transformer(model_config(args, tok.vocab_size)), tok, tok


def settings_from(args, ckpt_path: Path, decode_max_len: int, bleu_tokenize: str):
    """The TrainSettings of this run: every field that has a flag of the same name, plus
    those the command line works out."""
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainSettings)
             if hasattr(args, f.name)}
    return TrainSettings(**given, checkpoint=str(ckpt_path), decode_max_len=decode_max_len,
                         bleu_tokenize=bleu_tokenize, progress=not args.no_progress)


def run(args, ckpt_path: Path, kernels: bool = False) -> Trainer:
    device = pick_device(args.device)
    dist = init_distributed(device.type)
    if dist.enabled and device.type == "cuda":
        device = torch.device("cuda", dist.local_rank)
    random.seed(args.seed), np.random.seed(args.seed), torch.manual_seed(args.seed)
    train_pairs, valid_pairs, test_pairs, bleu_tokenize = load_data(args)
    model, src_tok, tgt_tok = build(args, ckpt_path, train_pairs)
    if device.type == "cpu":
        fast.accelerate(model, kernels=kernels)   # same model, faster CPU steps
    from ..data.batching import encode_pairs
    examples = encode_pairs(train_pairs, src_tok, tgt_tok, max_len=model.config.max_len)
    if not examples:
        raise SystemExit(f"error: no training pair fits in max_len={model.config.max_len}")
    decode_max_len = min(max(len(t) for _, t in examples) + 10, model.config.max_len - 1)
    settings = settings_from(args, ckpt_path, decode_max_len, bleu_tokenize)
    extra = {"command": "python -m transformer_lib.train " + shlex.join(sys.argv[1:]),
             "task": args.task or "corpus"}
    trainer = Trainer(model, src_tok, tgt_tok, examples, valid_pairs, settings, str(device),
                      dist, extra)
    if args.resume:
        trainer.resume()
    if dist.enabled:
        torch.manual_seed(args.seed + 1000 * dist.rank + trainer.step)  # own dropout per rank
    start, first = time.perf_counter(), trainer.step
    trainer.fit()
    if dist.is_main and trainer.step > first:
        print(f"trained steps {first + 1}-{trainer.step} in {time.perf_counter() - start:.1f} s "
              "(validation included)")
    if test_pairs is not None and dist.is_main:
        scores = evaluate_translation(trainer.model, test_pairs, src_tok, tgt_tok,
                                      decode_max_len, bleu_tokenize, device)
        trainer.extra["test"] = {"exact_match": scores["exact_match"], "bleu": scores["bleu"],
                                 "n": len(test_pairs)}
        trainer.save()
        print(f"test: exact match {100 * scores['exact_match']:.2f}%  "
              f"BLEU {scores['bleu']:.2f}  ({len(test_pairs)} pairs)")
    cleanup(dist)
    return trainer


def wants_compiled_kernels(parser: argparse.ArgumentParser, args) -> bool:
    """Whether this run uses the compiled CPU kernels; builds them now (once), not
    mid-training.

    ``--compiled-kernels``: yes, or a usage error naming the flag if they cannot be built.
    ``--no-compiled-kernels``: no. Neither (the default): yes for CPU training where they
    can be built, else a one-line note and PyTorch's own kernels (the same masks, slower).
    """
    if args.compiled_kernels is False:
        return False
    if args.compiled_kernels is None and pick_device(args.device).type != "cpu":
        return False                    # the kernels are for CPU tensors
    main_process = os.environ.get("RANK", "0") == "0"
    if main_process:
        print("compiled CPU kernels: loading (the first run builds them, ~30 s) ...",
              flush=True)
    problem = fast.kernels_available()
    if problem is not None:
        if args.compiled_kernels:
            parser.error(f"--compiled-kernels: {problem}")
        if main_process:
            print(f"compiled CPU kernels: off ({problem}); the same training with PyTorch's "
                  "own kernels (--no-compiled-kernels skips this)")
        return False
    if main_process:
        print("compiled CPU kernels: on (--no-compiled-kernels: PyTorch's own kernels)")
    return True


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    ckpt_path = check_args(parser, args)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.keep_freed_memory:
        fast.keep_freed_memory()
    trainer = run(args, ckpt_path, wants_compiled_kernels(parser, args))
    if trainer.dist.is_main:
        print(f"checkpoint: {ckpt_path} (step {trainer.step})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
