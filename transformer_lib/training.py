"""Training (§5): label smoothing, the warm-up schedule, a run's configuration, and the loop.

The loop of :meth:`Trainer.fit` is the one notebook 07 writes by hand: token batches grouped
by length (§5.1), the label-smoothed loss (§5.4), backward, Adam with Eq. 3's learning rate
(§5.3), validation (loss, exact match, BLEU); plus what a long run needs: checkpoints that
resume bit for bit, the average of the last snapshots (§6.1), a time budget, a clean stop
on Ctrl-C or SIGTERM, bf16 autocast, and several processes (DDP, launched by ``torchrun``).

A run is described by one dataclass, :class:`TrainConfig`: the data, the model (a preset of
:class:`~transformer_lib.config.TransformerConfig` and the fields that override it) and the
settings; ``python -m transformer_lib.train`` makes one flag of each of its fields.
"""
from __future__ import annotations

import dataclasses
import math
import os
import platform
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from .batching import Batch, Example, check_pairs, encode_pairs, fits, token_batches
from .checkpoint import CheckpointError, load_checkpoint, rng_state, save_checkpoint, set_rng_state
from .checks import check_bool, check_choice, check_float, check_int
from .config import PRESETS, TransformerConfig
from .model import Transformer
from .search import translate
from .tokenizers import BPETokenizer, CharTokenizer, Tokenizer

Tensor = torch.Tensor
Pairs = List[Tuple[str, str]]


# Label smoothing (§5.4) -----------------------------------------------------------------
def smoothed_targets(target: Tensor, vocab_size: int, epsilon: float = 0.1,
                     pad_id: Optional[int] = 0) -> Tensor:
    """The target distribution q of label smoothing: (...) ids -> (..., V) probabilities.

    q puts ``1 - epsilon`` on the true token and spreads ``epsilon`` uniformly over the
    K allowed classes (the true one included): K = V - 1 with ``pad_id`` (the padding
    class never receives mass), K = V without it. Rows whose target is padding are zero.
    """
    check_int(vocab_size, "vocab_size", 2)
    check_float(epsilon, "epsilon", 0.0, 1.0, max_open=True)
    if not isinstance(target, Tensor) or target.dtype != torch.long:
        raise TypeError("target must be a torch.long tensor of class ids")
    K = vocab_size - (pad_id is not None)
    q = torch.full((*target.shape, vocab_size), epsilon / K, device=target.device)
    q.scatter_(-1, target.unsqueeze(-1), 1.0 - epsilon + epsilon / K)
    if pad_id is not None:
        q[..., pad_id] = 0.0
        q.masked_fill_((target == pad_id).unsqueeze(-1), 0.0)
    return q                                                                 # (..., V)


class LabelSmoothingLoss(nn.Module):
    """Cross-entropy against the label-smoothed targets of :func:`smoothed_targets` (§5.4),
    averaged over the positions whose target is not padding. Its minimum is the entropy of
    q, not zero. With ``pad_id=None`` it equals ``F.cross_entropy(logits, target,
    label_smoothing=epsilon)``.

    Shape:
        logits: (B, T, V) (any float dtype; computed in float32), target: (B, T) -> scalar.
    """

    def __init__(self, epsilon: float = 0.1, pad_id: Optional[int] = 0):
        super().__init__()
        self.epsilon = check_float(epsilon, "epsilon", 0.0, 1.0, max_open=True)
        self.pad_id = None if pad_id is None else check_int(pad_id, "pad_id", 0)

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        if not isinstance(logits, Tensor) or not logits.is_floating_point():
            raise TypeError("logits must be a floating-point tensor (B, T, V)")
        if not isinstance(target, Tensor) or target.dtype != torch.long \
                or logits.shape[:-1] != target.shape:
            raise TypeError(f"target must be a torch.long tensor of the logits' shape without "
                            f"V, {tuple(logits.shape[:-1])}")
        V, eps, pad = logits.shape[-1], self.epsilon, self.pad_id
        log_p = logits.float().log_softmax(dim=-1).reshape(-1, V)           # (B*T, V)
        target = target.reshape(-1)                                          # (B*T,)
        K = V - (pad is not None)
        nll = -log_p.gather(1, target.unsqueeze(1)).squeeze(1)              # -log p(y)
        smooth = -log_p.sum(dim=1)                                           # -sum_k log p_k
        if pad is None:
            return ((1.0 - eps) * nll + eps / K * smooth).mean()
        smooth = smooth + log_p[:, pad]                   # the padding class gets no mass
        keep = target != pad
        loss = (1.0 - eps) * nll + eps / K * smooth                          # (B*T,)
        return (loss * keep).sum() / keep.sum().clamp(min=1)


# The learning rate (§5.3) ------------------------------------------------------------------
def noam_lr(step: int, d_model: int, warmup: int = 4000, factor: float = 1.0) -> float:
    """lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)  (Eq. 3).

    The rate grows linearly for the first ``warmup`` steps, peaks at
    ``factor * (d_model * warmup)^-0.5`` and then decays as 1/sqrt(step). ``step`` counts
    from 1 (the first update), as in the paper.
    """
    for name, value in (("step", step), ("d_model", d_model), ("warmup", warmup)):
        check_int(value, name, 1)
    check_float(factor, "factor", 0.0, min_open=True)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def adam(model: nn.Module) -> torch.optim.Adam:
    """Adam with the paper's beta1 = 0.9, beta2 = 0.98, eps = 1e-9; the rate is set at every
    step (:func:`noam_lr`). Fused (one kernel per step) where every parameter is on a CPU
    or a CUDA GPU."""
    params = list(model.parameters())
    fused = all(p.device.type in ("cpu", "cuda") for p in params) or None
    return torch.optim.Adam(params, lr=0.0, betas=(0.9, 0.98), eps=1e-9, fused=fused)


def cooldown_scale(done: float, cooldown: float) -> float:
    """The factor on the rate once the fraction ``done`` of the run is over: 1, then a
    straight line down to 0 over the run's last ``cooldown`` (not in the paper: a short run
    ends on its smallest steps, where the schedule alone would still take large ones)."""
    return 1.0 if cooldown <= 0.0 else min(1.0, max(0.0, (1.0 - done) / cooldown))


# Scores --------------------------------------------------------------------------------
def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Fraction of hypotheses equal to their reference (outer spaces stripped)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    hits = sum(h.strip() == r.strip() for h, r in zip(hypotheses, references))
    return hits / len(references) if references else 0.0


def bleu(hypotheses: Sequence[str], references: Sequence[str], tokenize: str = "13a") -> float:
    """Corpus BLEU (0-100) with ``sacrebleu.corpus_bleu``, one reference per sentence.
    ``tokenize="13a"`` is the WMT standard (words, punctuation split off); ``"char"``
    scores characters, which credits a near miss of a short fixed-format output (a date)."""
    import sacrebleu

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    return sacrebleu.corpus_bleu(list(hypotheses), [list(references)], tokenize=tokenize).score


# A run's configuration -------------------------------------------------------------------
def option(default: Any, help: str, may_change: bool = False) -> Any:
    """A field of :class:`TrainConfig`: its default, its ``--help`` text, and whether a
    resumed run may change it (nothing the steps already taken or still to come depend on)."""
    return field(default=default, metadata={"help": help, "may_change": may_change})


MODEL_FIELDS = ("preset", "d_model", "layers", "heads", "d_ff", "d_k", "dropout", "max_len",
                "norm_first", "positions")


UNTIL_BUDGET = 10**9  # steps of a run that its time_budget ends (the command line's default)


@dataclass(frozen=True)
class TrainConfig:
    """One training run: what it trains on, which model, and how. The fields are the
    training command line's flags (``layers`` is ``--layers``); a model field left at None
    takes the preset's value."""

    # data: exactly one of task, corpus, train_file (with valid_file)
    task: Optional[str] = option(None, "a built-in task: dates (human-written dates to ISO)")
    corpus: Optional[str] = option(None, "a built-in corpus of real sentences: bible-en-fr "
                                   "(English->French verses), with its own recipe (below)")
    train_file: Optional[str] = option(None, "your own corpus: source<TAB>target lines")
    valid_file: Optional[str] = option(None, "its validation pairs (needed with --train-file)")
    test_file: Optional[str] = option(None, "pairs scored once at the end")
    vocab_size: int = option(8000, "BPE vocabulary shared by source and target (corpora)")
    n_train: int = option(20000, "training pairs of the date task")
    n_valid: int = option(1000, "validation pairs of the date task")
    n_test: int = option(1000, "test pairs of the date task")
    # the model
    preset: str = option("tiny", "the sizes to start from: tiny, base or big (Table 3)")
    d_model: Optional[int] = option(None, "d_model")
    layers: Optional[int] = option(None, "N: layers of the encoder and of the decoder")
    heads: Optional[int] = option(None, "h: attention heads")
    d_ff: Optional[int] = option(None, "d_ff: inner width of the feed-forward layers")
    d_k: Optional[int] = option(None, "d_k: per-head size of queries and keys (d_model/h)")
    dropout: Optional[float] = option(None, "P_drop (§5.4)")
    max_len: Optional[int] = option(None, "the longest sequence, in tokens")
    norm_first: Optional[bool] = option(None, "pre-norm layers, x + Sublayer(LayerNorm(x)); "
                                        "--no-norm-first: the paper's post-norm")
    positions: Optional[str] = option(None, "sinusoidal (§3.5) or learned (Table 3, row E)")
    # how to train
    steps: int = option(2000, "steps in all", may_change=True)
    max_tokens: int = option(2000, "padded tokens per batch (per process), source and target")
    warmup: int = option(400, "warm-up steps of Eq. 3")
    lr_factor: float = option(1.0, "a factor on Eq. 3's learning rate")
    label_smoothing: float = option(0.1, "epsilon_ls (§5.4)")
    cooldown: float = option(0.0, "over this last fraction of the run (of --steps, or of "
                             "--time-budget if that ends first) the rate falls linearly to 0")
    seed: int = option(0, "seeds Python, NumPy and PyTorch")
    bf16: bool = option(False, "bfloat16 autocast (a GPU, or a CPU with AVX512-BF16 or AMX)")
    eval_every: int = option(0, "validate every N steps (0: at the end)", True)
    eval_limit: int = option(500, "validation pairs decoded for exact match and BLEU", True)
    decode_max_len: Optional[int] = option(None, "longest decoded output in validation "
                                           "(default: the longest training target + 10)", True)
    save_every: int = option(0, "write a checkpoint every N steps (0: at the end)", True)
    average_last: int = option(0, "the final model is the mean of the last K snapshots (§6.1: "
                               "5)", True)
    average_every: int = option(100, "steps between those snapshots", True)
    time_budget: Optional[float] = option(None, "minutes after which training stops cleanly, "
                                          "with a checkpoint and the test set scored", True)
    keep_freed_memory: bool = option(True, "Linux with glibc: malloc keeps what a step frees "
                                     "for the next (fewer page faults; the same results)", True)
    progress: bool = option(True, "a progress bar", True)
    verbose: bool = option(True, "print the validation results", True)

    def __post_init__(self) -> None:
        given = [n for n in ("task", "corpus", "train_file") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(f"task: give exactly one of task, corpus or train_file, got "
                             f"{given or 'none'}")
        if self.task is not None:
            check_choice(self.task, "task", ("dates",))
        if self.corpus is not None:
            check_choice(self.corpus, "corpus", ("bible-en-fr",))
        if (self.train_file is None) != (self.valid_file is None):
            raise ValueError("valid_file: train_file and valid_file go together")
        for name in ("train_file", "valid_file", "test_file"):
            if getattr(self, name) is not None and not Path(getattr(self, name)).is_file():
                raise ValueError(f"{name}: no such file: {getattr(self, name)}")
        for name in ("vocab_size", "n_train", "n_valid", "n_test", "steps", "max_tokens",
                     "warmup", "average_every"):
            check_int(getattr(self, name), name, 1)
        check_int(self.vocab_size, "vocab_size", 5)
        for name in ("eval_every", "save_every", "average_last"):
            check_int(getattr(self, name), name, 0)
        check_int(self.seed, "seed", 0, 2**32 - 1)
        check_int(self.eval_limit, "eval_limit", 1)
        check_choice(self.preset, "preset", PRESETS)
        for name in ("d_model", "layers", "heads", "d_ff", "d_k", "decode_max_len"):
            if getattr(self, name) is not None:
                check_int(getattr(self, name), name, 1)
        if self.max_len is not None:
            check_int(self.max_len, "max_len", 2, 65536)
        if self.dropout is not None:
            check_float(self.dropout, "dropout", 0.0, 1.0, max_open=True)
        if self.positions is not None:
            check_choice(self.positions, "positions", ("sinusoidal", "learned"))
        check_float(self.lr_factor, "lr_factor", 0.0, min_open=True)
        check_float(self.label_smoothing, "label_smoothing", 0.0, 1.0, max_open=True)
        check_float(self.cooldown, "cooldown", 0.0, 1.0)
        if self.time_budget is not None:
            check_float(self.time_budget, "time_budget", 0.0, min_open=True)
        for name in ("bf16", "keep_freed_memory", "progress", "verbose"):
            check_bool(getattr(self, name), name)
        if self.norm_first is not None:
            check_bool(self.norm_first, "norm_first")

    def replace(self, **changes: Any) -> "TrainConfig":
        return dataclasses.replace(self, **changes)

    def model_config(self, vocab_size: int) -> TransformerConfig:
        """The preset, sized to the vocabulary, with the model fields given."""
        names = dict(d_model="d_model", layers="N", heads="h", d_ff="d_ff", d_k="d_k",
                     dropout="P_drop", max_len="max_len", norm_first="norm_first",
                     positions="positions")
        given = {names[f]: getattr(self, f) for f in names if getattr(self, f) is not None}
        try:
            return PRESETS[self.preset](vocab_size, **given)
        except (TypeError, ValueError) as e:
            raise ValueError(f"model: {e}") from None


def resume_differences(stored: Dict[str, Any], config: TrainConfig) -> Dict[str, Tuple[Any, Any]]:
    """The fields, other than those a resumed run may change, where ``config`` differs from
    the ``stored`` run's: ``{field: (new, stored)}``."""
    new = dataclasses.asdict(config)
    return {f.name: (new[f.name], stored.get(f.name)) for f in dataclasses.fields(config)
            if not f.metadata["may_change"] and new[f.name] != stored.get(f.name)}


# Several processes, one per device (DDP, launched by torchrun) ---------------------------
@dataclass(frozen=True)
class DistContext:
    """This process's rank among ``world_size`` processes; rank 0 writes files and prints."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device_type: str) -> DistContext:
    """Join the process group that ``torchrun`` describes in the environment (RANK,
    WORLD_SIZE, ...): NCCL on GPUs, gloo on CPUs. One process alone: rank 0 of 1."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return DistContext()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
    return DistContext(dist.get_rank(), dist.get_world_size(), local_rank)


def bf16_problem(device: torch.device) -> Optional[str]:
    """None where bf16 autocast is a sound choice on ``device``, else why not in one line:
    on CPUs without native bf16 (AVX512-BF16, AMX or ARM's BF16) PyTorch emulates it, many
    times slower than fp32."""
    if device.type == "cuda":
        ok = not torch.cuda.is_available() or torch.cuda.is_bf16_supported()
        return None if ok else f"{torch.cuda.get_device_name(device)} has no bfloat16"
    if device.type != "cpu":
        return None
    try:
        with open("/proc/cpuinfo") as f:
            flags = {w for line in f if line.startswith(("flags", "Features")) for w in line.split()}
        if flags & {"avx512_bf16", "amx_bf16", "bf16"}:
            return None
    except OSError:                                        # not Linux: time a product
        a = torch.randn(256, 256)
        times = []
        for dtype in (torch.float32, torch.bfloat16, torch.float32, torch.bfloat16):
            start = time.perf_counter()
            a.to(dtype) @ a.to(dtype)
            times.append(time.perf_counter() - start)
        if times[3] <= 3 * times[2]:
            return None
    return (f"this CPU ({platform.processor() or platform.machine()}) has no native bfloat16 "
            "(AVX512-BF16 or AMX on x86): bf16 would be many times slower than fp32 here")


def keep_freed_memory() -> None:
    """Linux with glibc: raise malloc's trim and mmap thresholds to 1 GiB, so that the memory
    a step frees is kept for the next step instead of handed back to the OS and faulted in
    again, page by page (what jemalloc or tcmalloc would do). Changes no result."""
    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-1, 1 << 30)                          # M_TRIM_THRESHOLD
        libc.mallopt(-3, 1 << 30)                          # M_MMAP_THRESHOLD


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# The trainer -------------------------------------------------------------------------------
class Trainer:
    """Trains ``model`` on ``train_examples`` [(src_ids, tgt_ids)] as ``config`` says,
    validating on ``valid_pairs`` [(source, reference)].

    The batches of epoch e are ``token_batches(train_examples, shuffle=True, seed=seed+e)``,
    taken in order; (epoch, position) is saved with everything else, so a resumed run sees
    the very batches, dropout masks and learning rates an uninterrupted one would.
    ``checkpoint``: the file :meth:`save` writes and :meth:`resume` reads (None: none).
    ``extra``: the run's own record (values the safe loader reads), kept in checkpoints.
    """

    def __init__(self, model: Transformer, tokenizer: Tokenizer, train_examples: List[Example],
                 valid_pairs: Pairs, config: TrainConfig, checkpoint: Any = None,
                 device: Any = None, dist_context: DistContext = DistContext(),
                 extra: Optional[dict] = None):
        if not isinstance(model, Transformer):
            raise TypeError(f"model must be a transformer_lib Transformer, got "
                            f"{type(model).__name__}")
        if not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"tokenizer must be a Tokenizer, got {type(tokenizer).__name__}")
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
        if not train_examples:
            raise ValueError("train_examples is empty: nothing to train on")
        self.model, self.tokenizer, self.config = model, tokenizer, config
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model.to(self.device)
        self.dist, self.extra = dist_context, dict(extra or {})
        self.checkpoint = None if checkpoint is None else Path(checkpoint)
        self.train_examples = train_examples
        self.valid_pairs = [p for p in check_pairs(valid_pairs) if fits(
            (tokenizer.encode(p[0]), tokenizer.encode(p[1])), model.config.max_len)]
        self.valid_examples = encode_pairs(self.valid_pairs, tokenizer)
        longest = max(len(t) for _, t in train_examples) + 10
        self.decode_max_len = config.decode_max_len or min(longest, model.config.max_len)
        self.ddp_model: nn.Module = self.model
        if self.dist.enabled:
            ids = [self.device.index or self.dist.local_rank] if self.device.type == "cuda" else None
            self.ddp_model = nn.parallel.DistributedDataParallel(self.model, device_ids=ids)
        self.criterion = LabelSmoothingLoss(config.label_smoothing, model.config.pad_id)
        self.optimizer = adam(self.model)
        self.step, self.epoch, self.position = 0, 0, 0
        self.history: Dict[str, List[float]] = {k: [] for k in (
            "step", "loss", "lr", "val_step", "val_loss", "val_exact_match", "val_bleu")}
        self.snapshots: Dict[str, Tensor] = {}     # sum of the weights at the snapshot steps
        self.snapshot_steps: List[int] = []
        self.batches: List[Batch] = []
        self.stop_signal: Optional[int] = None     # set by a SIGINT or SIGTERM during fit
        self.budget_spent = False                  # fit stopped: config.time_budget ran out
        self.saved_step: Optional[int] = None      # step of the last checkpoint written

    # one step ----------------------------------------------------------------------------
    def next_batch(self) -> Batch:
        """This process's next batch; a new epoch reshuffles with ``seed + epoch``."""
        if self.position >= len(self.batches):
            if self.batches:
                self.epoch, self.position = self.epoch + 1, 0
            self.batches = self.epoch_batches(self.epoch)
        self.position += 1
        return self.batches[self.position - 1]

    def epoch_batches(self, epoch: int) -> List[Batch]:
        """The batches of ``epoch``; with K processes, every K-th from this one's rank on (the
        tail that does not divide evenly is dropped: all take the same number of steps)."""
        c, k = self.config, self.dist.world_size
        batches = token_batches(self.train_examples, c.max_tokens, True, c.seed + epoch,
                                self.model.config.pad_id)
        if len(batches) < k:
            raise ValueError(f"{len(batches)} batches cannot be shared by {k} processes: "
                             "lower max_tokens or use fewer processes")
        return batches[self.dist.rank : len(batches) - len(batches) % k : k]

    def lr(self, scale: float = 1.0) -> float:
        """The learning rate of the next step: Eq. 3, times the cool-down's ``scale``."""
        c = self.config
        return noam_lr(self.step + 1, self.model.config.d_model, c.warmup, c.lr_factor) * scale

    def train_step(self, batch: Batch, lr: float) -> float:
        """Forward, label-smoothed loss, backward, one Adam step at rate ``lr``; the loss."""
        batch = batch.to(self.device)
        self.ddp_model.train()
        with torch.autocast(self.device.type, torch.bfloat16, enabled=self.config.bf16):
            logits = self.ddp_model(batch.src, batch.tgt_in)                 # (B, T, V)
        loss = self.criterion(logits, batch.tgt_out)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        return loss.item()

    # validation -------------------------------------------------------------------------
    @torch.no_grad()
    def validate(self) -> Dict[str, float]:
        """Loss on every validation pair (teacher forcing, per token), and exact match and
        BLEU of the greedy translations of the first ``eval_limit`` pairs."""
        c, model = self.config, self.model
        model.eval()
        total, tokens = 0.0, 0
        for batch in token_batches(self.valid_examples, c.max_tokens, False,
                                   pad_id=model.config.pad_id):
            batch = batch.to(self.device)
            with torch.autocast(self.device.type, torch.bfloat16, enabled=c.bf16):
                logits = model(batch.src, batch.tgt_in)
            total += self.criterion(logits, batch.tgt_out).item() * batch.n_tokens
            tokens += batch.n_tokens
        pairs = self.valid_pairs[: c.eval_limit]
        with torch.autocast(self.device.type, torch.bfloat16, enabled=c.bf16):
            hyps = translate(model, self.tokenizer, [s for s, _ in pairs],
                             max_len=self.decode_max_len, batch_size=256)
        refs = [t for _, t in pairs]
        tokenize = "char" if c.task == "dates" else "13a"
        model.train()
        return {"loss": total / tokens if tokens else math.nan,
                "exact_match": exact_match(hyps, refs) if pairs else math.nan,
                "bleu": bleu(hyps, refs, tokenize) if pairs else math.nan}

    # averaging (§6.1) --------------------------------------------------------------------
    def snapshot_due(self, step: int) -> bool:
        """Whether ``step`` is one of the last ``average_last`` snapshot steps."""
        c, to_go = self.config, self.config.steps - step
        return 0 <= to_go < c.average_last * c.average_every and to_go % c.average_every == 0

    @torch.no_grad()
    def take_snapshot(self) -> None:
        """Add the weights to the sum at a snapshot step; at the last step load the mean."""
        if not self.snapshot_due(self.step):
            return
        for name, p in self.model.named_parameters():
            self.snapshots[name] = self.snapshots[name] + p if name in self.snapshots else p.clone()
        self.snapshot_steps.append(self.step)
        if self.step == self.config.steps:
            for name, p in self.model.named_parameters():
                p.copy_(self.snapshots[name] / len(self.snapshot_steps))
            self.say(f"step {self.step}: weights averaged over the last "
                     f"{len(self.snapshot_steps)} snapshots, {self.config.average_every} apart")
            self.snapshots, self.snapshot_steps = {}, []

    # checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """Everything needed to resume, in types ``torch.load(weights_only=True)`` reads."""
        return {"config": dataclasses.asdict(self.model.config),
                "run": dataclasses.asdict(self.config),
                "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "step": self.step, "epoch": self.epoch, "position": self.position,
                "rng": rng_state(), "history": self.history,
                "snapshots": {"sum": self.snapshots, "steps": self.snapshot_steps},
                "tokenizer": self.tokenizer.to_dict(), "extra": self.extra}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        if TransformerConfig(**state["config"]) != self.model.config:
            raise CheckpointError("the checkpoint's model differs from this trainer's model")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step, self.epoch, self.position = state["step"], state["epoch"], state["position"]
        self.history = {k: list(v) for k, v in state["history"].items()}
        self.snapshots, self.snapshot_steps = state["snapshots"]["sum"], state["snapshots"]["steps"]
        if not all(self.snapshot_due(s) for s in self.snapshot_steps):   # other settings now
            self.say("note: the checkpoint's snapshots are not those of these averaging "
                     "settings: the average starts afresh")
            self.snapshots, self.snapshot_steps = {}, []
        self.batches = self.epoch_batches(self.epoch)
        set_rng_state(state["rng"])

    def save(self) -> None:
        """Write the checkpoint (rank 0 only)."""
        if self.checkpoint is not None and self.dist.is_main:
            save_checkpoint(self.checkpoint, self.state_dict())
            self.saved_step = self.step

    def resume(self) -> None:
        """Continue from the checkpoint file: the next step is the one it had not taken."""
        state = load_checkpoint(self.checkpoint)
        if state.get("exported") or "optimizer" not in state:
            raise CheckpointError(f"{self.checkpoint} is an exported model, not a training "
                                  "checkpoint: it holds no optimizer state and cannot be resumed")
        self.load_state_dict(state)
        self.saved_step = self.step

    # the loop -------------------------------------------------------------------------------
    def fit(self) -> Dict[str, List[float]]:
        """Train until ``config.steps``, the time budget, or a stop (SIGINT, that is Ctrl-C
        or a notebook's interrupt, or SIGTERM): the step being computed finishes, a
        checkpoint is written, and ``fit`` returns; a second signal stops at once. Returns
        the history (step, loss, lr, val_*). A due checkpoint is written before validation,
        so a failing validation cannot lose the steps before it."""
        c = self.config
        if c.keep_freed_memory:
            keep_freed_memory()
        self.stop_signal, self.budget_spent = None, False
        start, budget = time.perf_counter(), 60 * (c.time_budget or math.inf)
        bar = self.progress_bar()
        with self.signals_stop():
            while self.step < c.steps:
                done = max(self.step / c.steps, (time.perf_counter() - start) / budget)
                lr = self.lr(self.agreed_scale(cooldown_scale(done, c.cooldown)))
                loss = self.train_step(self.next_batch(), lr)
                if not math.isfinite(loss):
                    raise FloatingPointError(f"loss is {loss} at step {self.step + 1}: lower "
                                             "lr_factor or raise warmup")
                self.step += 1
                for key, value in (("step", self.step), ("loss", loss), ("lr", lr)):
                    self.history[key].append(value)
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", refresh=False)
                self.take_snapshot()
                last = self.step == c.steps
                due = last or bool(c.save_every and self.step % c.save_every == 0)
                if due:
                    self.save()
                if last or (c.eval_every and self.step % c.eval_every == 0):
                    self.validate_and_log()
                    if due:
                        self.save()                                    # with its scores
                self.budget_spent = time.perf_counter() - start >= budget
                if not last and self.stop_requested():
                    if not due:
                        self.save()
                    break
        bar.close()
        return self.history

    def validate_and_log(self) -> None:
        if not self.dist.is_main:
            return
        v = self.validate()
        for key in ("loss", "exact_match", "bleu"):
            self.history[f"val_{key}"].append(v[key])
        self.history["val_step"].append(self.step)
        self.say(f"step {self.step}: val loss {v['loss']:.4f}  exact match "
                 f"{100 * v['exact_match']:.1f}%  BLEU {v['bleu']:.1f}")

    def agreed_scale(self, scale: float) -> float:
        """With DDP, every process takes the lowest cool-down factor: their clocks differ,
        their updates must not."""
        if self.dist.enabled and scale < 1.0:
            t = torch.tensor([scale], device=self.device)
            dist.all_reduce(t, op=dist.ReduceOp.MIN)
            scale = float(t.item())
        return scale

    def stop_requested(self) -> bool:
        """A signal or the budget, on any process (all processes stop at the same step)."""
        flag = bool(self.stop_signal or self.budget_spent)
        if self.dist.enabled:
            t = torch.tensor([float(flag)], device=self.device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            flag = bool(t.item())
        self.budget_spent = flag and not self.stop_signal
        return flag

    def signals_stop(self) -> Any:
        """Inside the block, the first SIGINT or SIGTERM asks the loop to stop after the step
        being computed; a second one raises KeyboardInterrupt (only in the main thread, where
        Python delivers signals)."""
        trainer = self

        class Handlers:
            def __enter__(self) -> None:
                self.old = {}
                if threading.current_thread() is threading.main_thread():
                    self.old = {s: signal.signal(s, self.handle)
                                for s in (signal.SIGINT, signal.SIGTERM)}

            def handle(self, signum: int, frame: Any) -> None:
                if trainer.stop_signal is not None:
                    trainer.stop_signal = signum           # the status names the last one
                    raise KeyboardInterrupt
                trainer.stop_signal = signum
                if trainer.dist.is_main:
                    print(f"\n{signal.Signals(signum).name}: stopping after step "
                          f"{trainer.step + 1} to write a checkpoint (again: stop at once)",
                          file=sys.stderr, flush=True)

            def __exit__(self, *exc: Any) -> None:
                for s, handler in self.old.items():
                    signal.signal(s, handler)

        return Handlers()

    def progress_bar(self) -> Any:
        from tqdm import tqdm

        total = None if self.config.steps == UNTIL_BUDGET else self.config.steps
        return tqdm(total=total, initial=self.step, unit="step", desc="train",
                    disable=not (self.config.progress and self.dist.is_main),
                    mininterval=0.1 if sys.stderr.isatty() else 2.0)

    def say(self, message: str) -> None:
        if self.config.verbose and self.dist.is_main:
            print(message, flush=True)


# From a configuration to a ready trainer --------------------------------------------------
@dataclass
class Run:
    """What :func:`prepare` returns: the trainer, the test pairs (or None), and one note for
    each thing worth telling (a vocabulary smaller than asked, pairs left out as too long)."""

    trainer: Trainer
    test_pairs: Optional[Pairs]
    notes: List[str]


def load_pairs(config: TrainConfig) -> Dict[str, Optional[Pairs]]:
    """``{"train", "valid", "test"}`` (source, target) pairs of the configured data."""
    if config.task == "dates":
        from .dates import make_date_splits

        try:
            return dict(make_date_splits(config.n_train, config.n_valid, config.n_test))
        except ValueError as e:
            raise ValueError(f"n_valid: {e}") from None
    if config.corpus is not None:
        from .corpus import bible_en_fr

        return dict(bible_en_fr())
    from .corpus import read_parallel

    splits: Dict[str, Optional[Pairs]] = {}
    for name in ("train", "valid", "test"):
        path = getattr(config, f"{name}_file")
        try:
            splits[name] = None if path is None else read_parallel(path)
        except (OSError, ValueError) as e:
            raise ValueError(f"{name}_file: {e}") from None
    return splits


def prepare(config: TrainConfig, tokenizer: Optional[Tokenizer] = None,
            model_config: Optional[TransformerConfig] = None, checkpoint: Any = None,
            device: Any = None, dist_context: DistContext = DistContext(),
            extra: Optional[dict] = None) -> Run:
    """Everything before the first step: seeds (``config.seed``), loads the pairs, trains
    the tokenizer (one vocabulary for both sides, §5.1: characters for the dates, BPE for
    sentences) unless one is given, builds the model (``model_config``, else the preset with
    the config's model fields), encodes every split with the one length filter, and checks
    that a batch of ``max_tokens`` holds the longest pair. ValueError names the field."""
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    seed_everything(config.seed)
    splits, notes = load_pairs(config), []
    train = splits["train"] or []
    if tokenizer is None:
        texts = [s for s, _ in train] + [t for _, t in train]
        if config.task == "dates":
            tokenizer = CharTokenizer.train(texts)
        else:
            tokenizer = BPETokenizer.train(texts, config.vocab_size)
            if tokenizer.vocab_size != config.vocab_size:
                notes.append(f"vocab_size: the corpus gives {tokenizer.vocab_size} tokens, not "
                             f"{config.vocab_size}")
    model_config = model_config or config.model_config(tokenizer.vocab_size)
    if model_config.src_vocab_size != tokenizer.vocab_size:
        raise ValueError(f"model: vocabulary of {model_config.src_vocab_size} for a tokenizer "
                         f"of {tokenizer.vocab_size}")
    max_len, kept = model_config.max_len, {}
    for name, pairs in splits.items():
        if pairs is None:
            continue
        examples = encode_pairs(pairs, tokenizer)
        keep = [i for i, ex in enumerate(examples) if fits(ex, max_len)]
        if not keep:
            raise ValueError(f"{name}: none of its {len(pairs)} pairs fits the model's "
                             f"max_len={max_len} tokens: raise max_len")
        if len(keep) < len(pairs):
            notes.append(f"{name}: {len(pairs) - len(keep)} of {len(pairs)} pairs are longer "
                         f"than max_len={max_len} tokens and are left out")
        kept[name] = ([pairs[i] for i in keep], [examples[i] for i in keep])
    need = max(max(len(s), len(t) + 1) for n in ("train", "valid") for s, t in kept[n][1])
    if need > config.max_tokens:
        raise ValueError(f"max_tokens: {config.max_tokens} is below the {need} tokens the "
                         f"longest pair needs in a batch; give at least {need}")
    model = Transformer(model_config)
    trainer = Trainer(model, tokenizer, kept["train"][1], kept["valid"][0], config, checkpoint,
                      device, dist_context, extra)
    return Run(trainer, kept["test"][0] if "test" in kept else None, notes)
