"""A training run as one object, and the one function that assembles it.

:class:`TrainJob` says what to train on (:class:`DataSpec`), which model
(:class:`ModelSpec`, or tokenizers and a full :class:`TransformerConfig` of your own) and
how (:class:`TrainSettings`). :func:`prepare` turns it into a ready :class:`Trainer`: it
loads the pairs, trains or takes the tokenizers, builds the model, encodes every split once
with one length filter and reports what that filter left out. The command line
(``python -m transformer_lib.train``) and the notebooks both go through it.

Errors are :class:`JobError` (a ``ValueError``) naming the field of the job at fault
(``data.valid_file``, ``model.max_len``, ...), never a command-line flag.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
import torch

from ..config import TransformerConfig
from ..data.batching import Example, encode_fitting
from ..data.tokenizers import Tokenizer
from ..model import Transformer
from .distributed import DistContext
from .job_specs import HEADER_NAMES, PRESETS, DataSpec, JobError, ModelSpec, Pairs, job_int
from .settings import SEED_MAX, TrainSettings
from .trainer import Trainer

__all__ = [
    "JobError",
    "job_int",
    "DataSpec",
    "HEADER_NAMES",
    "ModelSpec",
    "PRESETS",
    "Pairs",
    "SEED_MAX",
    "TrainJob",
    "PreparedRun",
    "new_tokenizers",
    "encode_split",
    "check_max_tokens",
    "seed_everything",
    "prepare",
]

Note = Tuple[str, str]  # (field of the job, what to tell about it)
SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class TrainJob:
    """One training run: data, model and settings (see :func:`prepare`)."""

    data: DataSpec
    model: Union[ModelSpec, TransformerConfig] = ModelSpec()
    settings: TrainSettings = field(default_factory=TrainSettings)


@dataclass
class PreparedRun:
    """What :func:`prepare` returns: the trainer, the test pairs (or None) and one line
    for each thing worth telling (vocabulary size, pairs left out by the length filter)."""

    trainer: Trainer
    test_pairs: Optional[Pairs]
    notes: List[Note]
    left_out: Dict[str, int]


def new_tokenizers(data: DataSpec, train: Pairs, notes: List[Note]) -> Tuple[Tokenizer, Tokenizer]:
    """One vocabulary shared by source and target (§5.1), so embeddings can be tied."""
    from ..data.tokenizers import BPETokenizer, CharTokenizer

    texts = [s for s, _ in train] + [t for _, t in train]
    if data.task == "dates":
        tok: Tokenizer = CharTokenizer.train(texts)
        return tok, tok
    if data.vocab_size <= 4:
        raise JobError(
            "data.vocab_size", f"must be > 4 (the special tokens), got {data.vocab_size}"
        )
    tok = BPETokenizer.train(texts, vocab_size=data.vocab_size)
    if tok.vocab_size > data.vocab_size:
        notes.append(
            (
                "data.vocab_size",
                f"{data.vocab_size} is below what the corpus needs "
                "(every character it holds and 4 special tokens): the vocabulary has "
                f"{tok.vocab_size} tokens",
            )
        )
    elif tok.vocab_size < data.vocab_size:
        notes.append(
            (
                "data.vocab_size",
                f"{data.vocab_size}: the corpus yields only "
                f"{tok.vocab_size} tokens (no more pairs occur twice); the vocabulary "
                "has that many",
            )
        )
    return tok, tok


def encode_split(
    name: str, pairs: Pairs, src_tok: Tokenizer, tgt_tok: Tokenizer, max_len: int
) -> Tuple[Pairs, List[Example], int]:
    """-> (kept pairs, their ids, how many were left out); refuses a split left empty."""
    kept, ids = encode_fitting(pairs, src_tok, tgt_tok, max_len)
    if not kept:
        shortest = min(len(src_tok.encode(s)) for s, _ in pairs)
        side = "sources" if shortest > max_len else "targets"
        what = (
            "no training pair fits" if name == "train" else f"none of its {len(pairs)} {side} fits"
        )
        raise JobError(
            f"data.{name}",
            f"{what} the model's max_len={max_len} tokens (the "
            f"shortest source has {shortest}): raise max_len or give shorter "
            "sentences",
        )
    return kept, ids, len(pairs) - len(kept)


def check_max_tokens(max_tokens: int, kept: Dict[str, Any]) -> None:
    """A batch of ``max_tokens`` must hold the longest training and validation pair: one
    row needs max(source length, target length + 1) tokens (the target gets BOS or EOS)."""
    for name in ("train", "valid"):
        need = max(max(len(s), len(t) + 1) for s, t in kept[name + "_ids"])
        if need > max_tokens:
            raise JobError(
                "settings.max_tokens",
                f"{max_tokens} is below the {need} tokens "
                f"the longest {name} pair needs in a batch; give at least {need}",
            )


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and PyTorch; NumPy's seeds are 32-bit."""
    job_int(seed, "settings.seed", 0, SEED_MAX)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _build_model(
    job: TrainJob, src_tok: Tokenizer, tgt_tok: Tokenizer, model_state: Optional[Dict[str, Any]]
) -> Transformer:
    """The job's model (its preset sized to the tokenizers, or its own config), checked
    against the tokenizers' vocabularies, with ``model_state`` loaded if given."""
    config = (
        job.model
        if isinstance(job.model, TransformerConfig)
        else job.model.config(src_tok.vocab_size)
    )
    if (config.src_vocab_size, config.tgt_vocab_size) != (src_tok.vocab_size, tgt_tok.vocab_size):
        raise JobError(
            "model",
            f"vocabulary sizes {config.src_vocab_size}/"
            f"{config.tgt_vocab_size} differ from the tokenizers' "
            f"{src_tok.vocab_size}/{tgt_tok.vocab_size}",
        )
    model = Transformer(config)
    if model_state is not None:
        model.load_state_dict(model_state)
    return model


def _encode_splits(
    splits: Dict[str, Any], src_tok: Tokenizer, tgt_tok: Tokenizer, max_len: int, notes: List[Note]
) -> Tuple[Dict[str, Any], Dict[str, int]]:
    """Every split encoded once with the one length filter: (kept pairs and their ids,
    pairs left out per split); a note for each split that lost pairs."""
    kept: Dict[str, Any] = {}
    left_out: Dict[str, int] = {}
    for name in SPLITS:
        split = splits.get(name)
        if split is not None:
            pairs, ids, dropped = encode_split(name, split, src_tok, tgt_tok, max_len)
            kept[name], kept[name + "_ids"], left_out[name] = pairs, ids, dropped
            if dropped:
                notes.append(
                    (
                        f"data.{name}",
                        f"{dropped} of {len(split)} pairs are "
                        f"longer than max_len={max_len} tokens and are left out",
                    )
                )
    return kept, left_out


def prepare(
    job: TrainJob,
    *,
    tokenizers: Optional[Tuple[Tokenizer, Tokenizer]] = None,
    model_state: Optional[Dict[str, Any]] = None,
    device: Optional[str] = None,
    dist: DistContext = DistContext(),
    extra: Optional[dict] = None,
) -> PreparedRun:
    """Assemble ``job`` into a ready :class:`Trainer` (not yet trained).

    Seeds Python, NumPy and PyTorch with ``job.settings.seed`` first, so the same job gives
    the same model. ``tokenizers``: (source, target) to use instead of training new ones
    (the command line passes a resumed checkpoint's). ``model_state``: weights to load.
    ``settings.bleu_tokenize`` follows the data (characters for dates, words otherwise).
    """
    seed_everything(job.settings.seed)
    splits = job.data.load()
    notes: List[Note] = []
    src_tok, tgt_tok = tokenizers or new_tokenizers(job.data, splits["train"] or [], notes)
    model = _build_model(job, src_tok, tgt_tok, model_state)
    kept, left_out = _encode_splits(splits, src_tok, tgt_tok, model.config.max_len, notes)
    check_max_tokens(job.settings.max_tokens, kept)
    settings = replace(job.settings, bleu_tokenize=job.data.bleu_tokenize)
    trainer = Trainer(
        model,
        src_tok,
        tgt_tok,
        kept["train_ids"],
        kept["valid"],
        settings,
        device,
        dist,
        {**(extra or {}), "data": job.data.identity()},
    )
    return PreparedRun(trainer, kept.get("test"), notes, left_out)
