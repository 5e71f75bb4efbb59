"""Train a Transformer from the command line: ``python -m transformer_lib.train``.

Examples::

    # the built-in date task, a small model, on this machine's CPU or GPU
    python -m transformer_lib.train --task dates --steps 3000 --out runs/dates
    # English->French with the corpus's own recipe, stopped cleanly after 10 minutes
    python -m transformer_lib.train --corpus bible-en-fr --time-budget 10 --out runs/lab
    # a parallel corpus of your own (one "source<TAB>target" pair a line), for 10 minutes
    python -m transformer_lib.train --train-file train.tsv --valid-file valid.tsv \
        --time-budget 10 --out runs/mine
    # continue a run where it stopped
    python -m transformer_lib.train --task dates --steps 6000 --out runs/dates --resume
    # several processes (DDP; gloo on CPUs, NCCL on GPUs)
    torchrun --nproc_per_node=2 -m transformer_lib.train --task dates --out runs/ddp

Every option but the last group is a field of ``transformer_lib.training.TrainConfig``.
Ctrl-C (or SIGTERM) stops after the current step, writes a checkpoint of it and prints the
command that resumes; a second one stops at once, keeping the last complete checkpoint.
"""
from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import time
import typing
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

# A built-in corpus brings its own defaults, and so does a corpus of your own: the recipe that
# gave the best BLEU after 10 minutes on a 2-core CPU (benchmarks/time_to_bleu.py): many small
# updates, no dropout (a short run ends before it could overfit), pre-norm layers, which take
# the high learning rate where the paper's post-norm ones diverge, and a rate that falls to 0
# over the last 30% of the run. Flags given win; the model's part applies without --preset.
RECIPES: Dict[str, Dict[str, Any]] = {
    "corpus": dict(d_model=128, layers=2, heads=4, d_ff=512, dropout=0.0, max_len=128,
                   norm_first=True, vocab_size=6000, max_tokens=1500, warmup=300,
                   lr_factor=0.8, cooldown=0.3, steps=6000, eval_limit=100),
}
# A corpus of your own gets it fitted to its size (words of --train-file, both sides): ten
# minutes see a small corpus 100 times or more, and a smaller vocabulary and some dropout do
# better (benchmarks/own_corpus.py); the Bible's 1.1 million words, seen ~6 times, do not.
FITTED = ((200_000, dict(vocab_size=4000, dropout=0.1)),)   # below this many words: these
MODEL_FIELDS = ("d_model", "layers", "heads", "d_ff", "d_k", "dropout", "max_len",
                "norm_first", "positions")
CHOICES = {"task": ("dates",), "corpus": ("bible-en-fr",), "preset": ("tiny", "base", "big"),
           "positions": ("sinusoidal", "learned")}


def exit_on_signal(message: str) -> Dict[Any, Any]:
    """SIGINT and SIGTERM end the process at once, with one line (``NAME: message``) and
    the shell's status 128 + the signal's number. Used where nothing is being written: while
    PyTorch loads (where an exception raised by a handler can abort the interpreter inside
    its C++ start-up) and while the run is prepared. Returns the handlers it replaced."""
    def handler(signum: int, frame: Any) -> None:
        print(f"{signal.Signals(signum).name}: {message}", file=sys.stderr, flush=True)
        os._exit(128 + signum)

    return {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}


def build_parser() -> argparse.ArgumentParser:
    """One flag per field of TrainConfig, with its help text; then the run's own options."""
    import dataclasses

    from .training import TrainConfig

    p = argparse.ArgumentParser(
        prog="python -m transformer_lib.train", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter, argument_default=argparse.SUPPRESS,
        epilog="a corpus (--corpus, or --train-file) brings these defaults (flags given win; "
        "the model's only without --preset and --resume):\n  " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in RECIPES["corpus"].items())
        + "\na corpus of your own (--train-file) gets them fitted to its size, counted in words "
        "(both sides) of the training file, because ten minutes see a small corpus many times: "
        + "; ".join(f"under {limit:,} words " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in fit.items()) for limit, fit in FITTED)
        + ".\n--time-budget without --steps trains until the budget is spent.")
    hints = typing.get_type_hints(TrainConfig)
    group = p.add_argument_group("the run (fields of TrainConfig)")
    for f in dataclasses.fields(TrainConfig):
        if f.name == "verbose":
            continue
        kind = [t for t in typing.get_args(hints[f.name]) if t is not type(None)] or [hints[f.name]]
        default = "the preset's" if f.name in MODEL_FIELDS else f.default
        help = f"{f.metadata['help']} (default: {default})"
        flag = "--" + f.name.replace("_", "-")
        if kind[0] is bool:
            group.add_argument(flag, action=argparse.BooleanOptionalAction, help=help)
        else:
            group.add_argument(flag, type=kind[0], choices=CHOICES.get(f.name), help=help)
    own = p.add_argument_group("this command")
    own.add_argument("--out", type=Path, required=True, help="the output folder")
    own.add_argument("--name", default="checkpoint.pt", help="the checkpoint's file in --out")
    own.add_argument("--resume", action="store_true", default=False,
                     help="continue --out/--name (the flags of the first run: the fields "
                     "that a resumed run may change are steps, time_budget, eval_*, save_every, "
                     "average_*, progress and keep_freed_memory)")
    own.add_argument("--override", action="store_true", default=False,
                     help="with --resume: accept other settings than the checkpoint's")
    own.add_argument("--force", action="store_true", default=False,
                     help="overwrite an existing checkpoint")
    own.add_argument("--device", default=None, help="cpu, cuda, cuda:1, mps (default: cuda "
                     "if available)")
    own.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    own.add_argument("--compiled-kernels", action=argparse.BooleanOptionalAction, default=None,
                     help="on a CPU, dropout, the feed-forward layer and attention through small "
                     "compiled kernels (transformer_lib.fast): the same masks, faster steps "
                     "(default: on where a C++ compiler can build them, ~30 s the first time)")
    own.add_argument("--compile", nargs="?", const="inductor", default=None, metavar="BACKEND",
                     choices=("inductor", "aot_eager", "eager"),
                     help="torch.compile the training step (the first steps compile: about 80 s "
                     "on 2 CPU cores); turns the compiled kernels off")
    return p


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def in_flags(message: str) -> str:
    """A TrainConfig error (``warmup must be ...``, ``train_file: ...``) in flags' terms."""
    from .training import TrainConfig

    head = message.split(" ")[0].rstrip(":")
    return flag(head) + message[len(head):] if head in TrainConfig.__dataclass_fields__ else message


def fitted_to(path: str) -> Tuple[Dict[str, Any], str]:
    """The settings of FITTED for a corpus of one's own, and its size in words, in words."""
    from .corpus import read_parallel

    pairs = read_parallel(path)
    words = sum(len(s.split()) + len(t.split()) for s, t in pairs)
    for limit, settings in FITTED:
        if words < limit:
            return settings, f"{len(pairs):,} pairs, {words:,} words (under {limit:,})"
    return {}, f"{len(pairs):,} pairs, {words:,} words"


def run_config(p: argparse.ArgumentParser, args: argparse.Namespace, stored: Optional[dict]):
    """The TrainConfig of the flags given, the corpus recipe and, when resuming, the stored
    run's model; a usage error naming the flag for a bad value."""
    from .training import UNTIL_BUDGET, TrainConfig

    fields = set(TrainConfig.__dataclass_fields__)
    given = {k: v for k, v in vars(args).items() if k in fields}
    if given.get("train_file") is not None and not Path(given["train_file"]).is_file():
        p.error(f"--train-file: no such file: {given['train_file']}")
    values: Dict[str, Any] = {}
    if "corpus" in given or "train_file" in given:
        recipe = dict(RECIPES["corpus"])
        own_model = "preset" not in given and stored is None
        if given.get("train_file") is not None:
            try:
                fit, size = fitted_to(given["train_file"])
            except ValueError as e:
                p.error(f"--train-file: {e}")
            recipe.update(fit)
            chosen = [f"{flag(k)} {v}" for k, v in fit.items()
                      if k not in given and (own_model or k not in MODEL_FIELDS)]
            print(f"your corpus: {size}: " + (" ".join(chosen) + " (fitted to its size; flags "
                  "given win)" if chosen else "the corpus recipe as it is"), flush=True)
        values = {k: v for k, v in recipe.items() if own_model or k not in MODEL_FIELDS}
    if stored is not None:
        values.update({k: stored[k] for k in ("preset", *MODEL_FIELDS)})
    if "time_budget" in given and "steps" not in given:
        values["steps"] = UNTIL_BUDGET  # the budget ends the run, not a step count
    values.update(given, progress=given.get("progress", True))
    try:
        return TrainConfig(**values)
    except (TypeError, ValueError) as e:
        p.error(in_flags(str(e)))


def check_device(p: argparse.ArgumentParser, name: Optional[str]) -> Any:
    import torch

    try:
        device = torch.device(name or ("cuda" if torch.cuda.is_available() else "cpu"))
    except RuntimeError as e:
        p.error(f"--device {name}: not a device PyTorch knows ({e}); use cpu, cuda or cuda:N")
    available = {"cpu": True, "cuda": torch.cuda.is_available(),
                 "mps": torch.backends.mps.is_available()}
    if not available.get(device.type, False):
        p.error(f"--device {name}: this machine has no such device for PyTorch "
                f"{torch.__version__}; leave out --device to run on the CPU")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        p.error(f"--device {name}: there are {torch.cuda.device_count()} CUDA devices")
    return device


def resume_command(argv: List[str]) -> str:
    args = [a for a in argv if a != "--force"] + ([] if "--resume" in argv else ["--resume"])
    launcher = (f"torchrun --nproc_per_node={os.environ['WORLD_SIZE']} -m transformer_lib.train"
                if "LOCAL_RANK" in os.environ else "python -m transformer_lib.train")
    return f"{launcher} {shlex.join(args)}"


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    exit_on_signal("stopped before training started; nothing to resume")
    import torch

    from . import fast
    from .checkpoint import CheckpointError, load_checkpoint
    from .config import TransformerConfig
    from .tokenizers import tokenizer_from_dict
    from .training import (UNTIL_BUDGET, bf16_problem, init_distributed, prepare,
                           resume_differences)

    p = build_parser()
    args = p.parse_args(argv)
    path = args.out / args.name
    if args.out.exists() and not args.out.is_dir():
        p.error(f"--out {args.out} is a file, not a folder")
    if Path(args.name).name != args.name or not args.name.strip():
        p.error(f"--name must be a file name (it goes into --out), got {args.name!r}")
    if args.override and not args.resume:
        p.error("--override only applies with --resume")
    stored: Optional[dict] = None
    ckpt: Optional[dict] = None
    if args.resume:
        try:
            ckpt = load_checkpoint(path)
        except (FileNotFoundError, CheckpointError) as e:
            p.error(f"--resume: {e}")
        if ckpt.get("exported") or "optimizer" not in ckpt:
            p.error(f"--resume: {path} is an exported model, not a training checkpoint: it "
                    "holds no optimizer state; start a new run (--force, or another --out)")
        stored = ckpt["run"]
    elif path.exists() and not args.force:
        p.error(f"{path} already exists: pass --resume to continue it or --force to overwrite it")
    config = run_config(p, args, stored)
    if stored is not None:
        differences = resume_differences(stored, config)
        listed = ", ".join(f"{flag(k)} {new} (checkpoint: {old})"
                           for k, (new, old) in differences.items())
        if any(k in MODEL_FIELDS or k == "preset" for k in differences):
            p.error(f"--resume: the checkpoint fixes the model, and these differ from it: "
                    f"{listed}; leave them out")
        if differences and not args.override:
            p.error(f"--resume: these differ from the checkpoint's: {listed}. Give its values "
                    "to continue the run exactly, or --override to use the new ones")
        if ckpt is not None and ckpt["step"] > config.steps:
            p.error(f"--resume: the checkpoint is at step {ckpt['step']}, beyond --steps "
                    f"{config.steps}: give --steps above it to go on")
    device = check_device(p, args.device)
    if config.bf16 and (problem := bf16_problem(device)):
        p.error(f"--bf16: {problem}. Train in fp32 (leave out --bf16), or on a GPU")
    if args.threads is not None:
        if args.threads < 1:
            p.error(f"--threads must be at least 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    if args.compile and args.compiled_kernels:
        p.error("--compiled-kernels: not with --compile (torch.compile makes its own kernels)")
    kernels = device.type == "cpu" and not args.compile and args.compiled_kernels is not False
    if kernels and (problem := fast.kernels_available()):
        if args.compiled_kernels:
            p.error(f"--compiled-kernels: {problem}")
        print(f"compiled CPU kernels: off ({problem}); PyTorch's own kernels instead")
        kernels = False
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        p.error(f"--out {args.out}: cannot create the folder ({e.strerror})")
    dist = init_distributed(device.type)
    if dist.enabled and device.type == "cuda":
        device = torch.device("cuda", dist.local_rank)
    extra = {"command": "python -m transformer_lib.train " + shlex.join(argv)}
    try:
        run = prepare(config, tokenizer_from_dict(ckpt["tokenizer"]) if ckpt else None,
                      TransformerConfig(**ckpt["config"]) if ckpt else None, path, device, dist,
                      extra)
    except ValueError as e:
        p.error(in_flags(str(e)))
    trainer = run.trainer
    for note in run.notes if dist.is_main else []:
        print(f"note: {in_flags(note)}")
    if device.type == "cpu" and not args.compile:
        fast.accelerate(trainer.model, kernels=kernels)       # the same model, faster steps
    if args.compile:
        trainer.ddp_model = fast.compile_model(trainer.ddp_model, device, dynamic=True,
                                               **({} if args.compile == "inductor" else
                                                  {"backend": args.compile}))
    if args.resume:
        trainer.resume()
    if dist.enabled:
        torch.manual_seed(config.seed + 1000 * dist.rank + trainer.step)  # own dropout per rank
    for s, handler in ((signal.SIGINT, signal.default_int_handler),
                       (signal.SIGTERM, signal.SIG_DFL)):
        signal.signal(s, handler)
    first, start = trainer.step, time.perf_counter()
    try:
        trainer.fit()
    except KeyboardInterrupt:                         # a second signal: stop at once
        last = (f"the last complete checkpoint is {path} (step {trainer.saved_step}). Resume "
                f"with: {resume_command(argv)}" if trainer.saved_step is not None else
                "no checkpoint was written")
        print(f"stopped at once; {last}", file=sys.stderr)
        return 128 + (trainer.stop_signal or signal.SIGINT)
    except (OSError, FloatingPointError) as e:
        last = (f"the last complete checkpoint is {path} (step {trainer.saved_step})"
                if trainer.saved_step is not None else "no checkpoint was written")
        what = "training diverged: " if isinstance(e, FloatingPointError) else ""
        print(f"error: {what}{e}; {last}", file=sys.stderr)
        return 1
    if not dist.is_main:
        return 0
    print(f"trained steps {first + 1}-{trainer.step} in {time.perf_counter() - start:.1f} s "
          "(validation included)")
    of = "" if config.steps == UNTIL_BUDGET else f" of {config.steps}"
    if trainer.stop_signal is not None:
        name = signal.Signals(trainer.stop_signal).name
        print(f"{name}: stopped after step {trainer.step}{of}; checkpoint {path}. "
              f"Resume with: {resume_command(argv)}", file=sys.stderr)
        return 128 + trainer.stop_signal
    if trainer.budget_spent:
        print(f"time budget of {config.time_budget:g} min spent: stopped after step "
              f"{trainer.step}{of}. To go on: {resume_command(argv)}")
    if run.test_pairs:
        exit_on_signal(f"training had finished; checkpoint {path} (step {trainer.step}) is "
                       "complete (the test set was not scored)")
        score_test(trainer, run.test_pairs)
    print(f"checkpoint: {path} (step {trainer.step})")
    return 0


def score_test(trainer: Any, pairs: List[Any]) -> None:
    """Exact match and BLEU of greedy translations of the test pairs: printed, and kept in
    the checkpoint (``extra["test"]``)."""
    from .search import translate
    from .training import bleu, exact_match

    hyps = translate(trainer.model, trainer.tokenizer, [s for s, _ in pairs],
                     max_len=trainer.decode_max_len, batch_size=256)
    refs = [t for _, t in pairs]
    scores = {"exact_match": exact_match(hyps, refs), "n": len(pairs),
              "bleu": bleu(hyps, refs, "char" if trainer.config.task == "dates" else "13a")}
    trainer.extra["test"] = scores
    trainer.save()
    print(f"test: exact match {100 * scores['exact_match']:.2f}%  BLEU {scores['bleu']:.2f}  "
          f"({len(pairs)} pairs)")


if __name__ == "__main__":
    sys.exit(main())
