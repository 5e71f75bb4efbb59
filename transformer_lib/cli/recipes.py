"""The recipes of the built-in corpora: the defaults that ``--corpus NAME`` brings to the
training command line (:mod:`transformer_lib.cli.train_args`)."""

from __future__ import annotations

import argparse
from typing import Any, Dict, List, Optional, Sequence, Tuple

# A built-in corpus brings its own defaults: the recipe that gave the best test BLEU after
# 10 minutes of training on a 2-core CPU (benchmarks/time_to_bleu.py; benchmarks/README.md).
# A short run wants many small updates (batches of 1,500 tokens), no dropout (it ends before
# it could overfit), a high learning rate, which pre-norm layers take where the paper's
# post-norm ones diverge, reached over 300 warm-up steps (200 were worse, 100 far worse),
# and a rate that falls to zero over the last 30% of the run (of --steps, or of
# --time-budget). For runs of half an hour or more see benchmarks/README.md (dropout).
# Flags given on the command line win; the model's part applies only without --preset and
# --resume.
CORPUS_RECIPES: Dict[str, Dict[str, Dict[str, Any]]] = {
    "bible-en-fr": {
        "model": {
            "d_model": 128,
            "layers": 2,
            "heads": 4,
            "d_ff": 512,
            "dropout": 0.0,
            "max_len": 128,
            "norm_first": True,
        },
        "training": {
            "vocab_size": 6000,
            "max_tokens": 1500,
            "warmup": 300,
            "lr_factor": 0.8,
            "cooldown": 0.3,
            "steps": 6000,
            "eval_limit": 100,
        },
    }
}


def recipe_flags(corpus: str) -> List[str]:
    """The corpus recipe as command-line flags (``--vocab-size 6000 ...``)."""
    recipe = CORPUS_RECIPES[corpus]
    values = {**recipe["training"], **recipe["model"]}
    flags: List[str] = []
    for dest, value in values.items():
        name = dest.replace("_", "-")
        if isinstance(value, bool):  # a switch: --norm-first or --no-norm-first
            flags.append(f"--{name}" if value else f"--no-{name}")
        else:
            flags += [f"--{name}", str(value)]
    return flags


def corpus_defaults(argv: Optional[Sequence[str]]) -> Dict[str, Any]:
    """The defaults that ``--corpus NAME`` in ``argv`` brings (its recipe), or {}. The
    model's part is left out with ``--preset`` (the preset's sizes) and with ``--resume``
    (the checkpoint's model, perhaps from an older recipe)."""
    probe = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    probe.add_argument("--corpus")
    probe.add_argument("--preset")
    probe.add_argument("--resume", action="store_true")
    try:
        known, _ = probe.parse_known_args(argv)
    except argparse.ArgumentError:  # the real parser says what is wrong
        return {}
    recipe = CORPUS_RECIPES.get(known.corpus)
    if recipe is None:
        return {}
    own_model = known.preset is None and not known.resume
    return {**recipe["training"], **(recipe["model"] if own_model else {})}


class TrainParser(argparse.ArgumentParser):
    """The training command's parser: ``--corpus NAME`` sets that corpus's recipe as the
    defaults of the flags not given."""

    def parse_known_args(  # type: ignore[override]
        self, args: Optional[Sequence[str]] = None, namespace: Optional[argparse.Namespace] = None
    ) -> Tuple[argparse.Namespace, List[str]]:
        if namespace is None:
            namespace = argparse.Namespace(**corpus_defaults(args))
        return super().parse_known_args(args, namespace)


def recipe_epilog() -> str:
    """What ``--help`` says about the corpus recipes."""
    lines = [
        "defaults of a built-in corpus (flags given win; the model's only without --preset "
        "and --resume):"
    ]
    for corpus in CORPUS_RECIPES:
        lines.append(f"  --corpus {corpus}: {' '.join(recipe_flags(corpus))}")
    return "\n".join(lines)
