"""The training loop (§5): token batches, label-smoothed loss, Adam with warm-up,
periodic validation, atomic checkpoints, exact resume, optional bf16 and DDP.

A stop asked for with :meth:`Trainer.request_stop` (the command line does it on Ctrl-C and
SIGTERM) ends :meth:`Trainer.fit` after the current step, with a checkpoint of that step."""
from __future__ import annotations

import dataclasses
import math
import time
import warnings
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from ..config import TransformerConfig
from ..data.batching import Example, encode_fitting, token_batches
from ..data.tokenizers import Tokenizer
from ..fast.allocator import keep_freed_memory
from ..model import Transformer
from .averaging import WeightAveraging
from .checkpoint import (load_checkpoint, remove_temporaries, rng_state, save_checkpoint,
                         set_rng_state)
from .distributed import DistContext, shard, wrap_model
from .loss import LabelSmoothingLoss
from .metrics import evaluate_translation
from .precision import bf16_problem
from .progress_display import make_display
from .run_end import RunEnd
from .schedule import make_optimizer
from .settings import TrainSettings, check_trainer_arguments, pick_device
from .validation import new_history, validation_loss

Pairs = Sequence[Tuple[str, str]]
__all__ = ["Trainer", "TrainSettings", "new_history", "pick_device"]


class Trainer(WeightAveraging, RunEnd):
    """Trains ``model`` on encoded ``train_examples`` [(src_ids, tgt_ids)], validating on
    ``valid_pairs`` [(source, reference)] strings.

    The batches of epoch e are ``token_batches(train_examples, shuffle=True, seed=seed+e)``,
    taken in order; (epoch, position) is saved, so a resumed run sees the very batches,
    dropout masks and learning rates an uninterrupted one would. ``extra`` (the run's own
    record, saved in every checkpoint) must hold only values the safe loader reads back.
    """

    def __init__(self, model: Transformer, src_tok: Tokenizer, tgt_tok: Tokenizer,
                 train_examples: Iterable[Example], valid_pairs: Pairs,
                 settings: TrainSettings, device: Optional[str] = None,
                 dist: DistContext = DistContext(), extra: Optional[dict] = None):
        check_trainer_arguments(model, src_tok, tgt_tok, settings, extra)
        train_examples = list(train_examples)
        if not train_examples:
            raise ValueError("train_examples is empty: nothing to train on (did every pair "
                             "exceed the model's max_len?)")
        if settings.decode_max_len is None:          # room for the longest target, and then some
            longest = max((len(t) for _, t in train_examples), default=54) + 10
            settings = dataclasses.replace(
                settings, decode_max_len=min(longest, model.config.max_len - 1))
        self.settings, self.dist, self.extra = settings, dist, dict(extra or {})
        self.device = pick_device(device)
        if settings.bf16 and (problem := bf16_problem(self.device)):
            warnings.warn(f"bf16=True: {problem}", stacklevel=2)
        self.model = model.to(self.device)
        self.ddp_model = wrap_model(self.model, dist, self.device)
        self.src_tok, self.tgt_tok = src_tok, tgt_tok
        self.train_examples = train_examples
        self.valid_pairs, self.valid_examples = encode_fitting(   # one filter: loss and BLEU
            valid_pairs, src_tok, tgt_tok, model.config.max_len)
        self.criterion = LabelSmoothingLoss(settings.label_smoothing, model.config.pad_id)
        self.optimizer, self.scheduler = make_optimizer(
            self.model, model.config.d_model, settings.warmup, settings.lr_factor)
        self.step, self.epoch, self.position, self.history = 0, 0, 0, new_history()
        self._batches: Optional[list] = None
        self.reset_average()                      # weight averaging (§6.1): no snapshot yet
        self.stop_signal: Optional[int] = None    # set by request_stop (e.g. on Ctrl-C)
        self.stopped_early = False                # fit returned before settings.steps
        self.budget_spent = False                 # ... because settings.time_budget ran out
        self.lr_scale = 1.0                       # settings.cooldown's factor on the rate
        self.saved_step: Optional[int] = None     # step of the last checkpoint written

    # batches ---------------------------------------------------------------------------
    def next_batch(self):
        """This rank's next batch; a new epoch reshuffles with ``seed + epoch``."""
        if self._batches is None or self.position >= len(self._batches):
            if self._batches is not None:
                self.epoch, self.position = self.epoch + 1, 0
            self._batches = self.epoch_batches(self.epoch)
        batch = self._batches[self.position]
        self.position += 1
        return batch

    def epoch_batches(self, epoch: int) -> list:
        """The batches of ``epoch`` that belong to this rank (DistributedSampler-like)."""
        s = self.settings
        batches = token_batches(self.train_examples, s.max_tokens, shuffle=True,
                                seed=s.seed + epoch, pad_id=self.model.config.pad_id)
        return shard(batches, self.dist)

    # one step ----------------------------------------------------------------------------
    def _autocast(self):
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.settings.bf16)

    def train_step(self, batch) -> float:
        """Forward, label-smoothed loss, backward, Adam step, schedule step; returns the loss."""
        batch = batch.to(self.device)
        self.ddp_model.train()
        with self._autocast():
            logits = self.ddp_model(batch.src, batch.tgt_in)                 # (B, T, V)
        loss = self.criterion(logits, batch.tgt_out)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.scheduler.step()
        return loss.item()

    # validation --------------------------------------------------------------------------
    @torch.no_grad()
    def validate(self) -> Dict[str, float]:
        """Validation loss (teacher forcing, all pairs) and exact match / BLEU of greedy
        translations of the first ``eval_limit`` pairs."""
        s, model = self.settings, self.model
        model.eval()
        loss = validation_loss(model, self.criterion, self.valid_examples, s.max_tokens,
                               self.device, self._autocast)
        pairs = self.valid_pairs[:s.eval_limit]
        scores = {"exact_match": math.nan, "bleu": math.nan}     # no validation pair: no score
        if pairs:
            with self._autocast():
                scores = evaluate_translation(model, pairs, self.src_tok, self.tgt_tok,
                                              s.decode_max_len, s.bleu_tokenize, self.device)
        model.train()
        return {"loss": loss, "exact_match": scores["exact_match"], "bleu": scores["bleu"]}

    # checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """Everything needed to resume, in types ``torch.load(weights_only=True)`` accepts."""
        return {
            "config": dataclasses.asdict(self.model.config),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "step": self.step, "epoch": self.epoch, "position": self.position,
            "rng": rng_state(),
            "history": self.history,
            "average": self.average_state(),
            "settings": dataclasses.asdict(self.settings),
            "src_tokenizer": self.src_tok.to_dict(), "tgt_tokenizer": self.tgt_tok.to_dict(),
            "extra": self.extra,
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        if TransformerConfig(**state["config"]) != self.model.config:
            raise ValueError("the checkpoint's model config differs from this model's")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.step, self.epoch, self.position = state["step"], state["epoch"], state["position"]
        self.history = {k: list(v) for k, v in state["history"].items()}
        self.load_average_state(state.get("average", {"sum": {}, "count": 0}))  # older: none
        self._batches = self.epoch_batches(self.epoch)
        set_rng_state(state["rng"])

    def save(self, path=None) -> None:
        """Write a checkpoint (rank 0 only; other ranks return at once)."""
        path = path or self.settings.checkpoint
        if path and self.dist.is_main:
            save_checkpoint(path, self.state_dict())
            self.saved_step = self.step

    def resume(self, path=None) -> None:
        path = path or self.settings.checkpoint
        if self.dist.is_main:
            remove_temporaries(path)            # left by a save that was killed
        self.load_state_dict(load_checkpoint(path))
        self.saved_step = self.step

    # the loop -----------------------------------------------------------------------------
    def fit(self) -> Dict[str, List[float]]:
        """Train until ``settings.steps`` or a :meth:`request_stop`; returns the history
        (step, loss, lr, val_*). Each due checkpoint is written before validation, so a
        failing validation cannot lose the steps before it."""
        s, main = self.settings, self.dist.is_main
        if s.keep_freed_memory:
            keep_freed_memory()                     # process-wide; changes no result
        self.stopped_early = self.budget_spent = False
        deadline = None if s.time_budget is None else time.perf_counter() + 60 * s.time_budget
        bar = make_display(s.progress, s.steps, self.step, show=main)
        self._track_end(None)                       # the first step's cool-down factor
        while self.step < s.steps:
            self._cool_down()
            lr = self.optimizer.param_groups[0]["lr"]
            loss = self.train_step(self.next_batch())
            if not math.isfinite(loss):
                raise FloatingPointError(f"loss is {loss} at step {self.step + 1}: lower "
                                         "the settings' lr_factor or raise their warmup")
            self.step += 1
            self._log(step=self.step, loss=loss, lr=lr)
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", refresh=False)
            last = self.step == s.steps
            self.take_snapshot(bar, last)
            due = last or bool(s.save_every and self.step % s.save_every == 0)
            if due:
                self.save()
            if main and (last or (s.eval_every and self.step % s.eval_every == 0)):
                self._validate_and_log(bar)
                if due:
                    self.save()                                 # now with its scores
            self._track_end(deadline)
            if not last and self._stop_requested():
                if not due:
                    self.save()
                self.stopped_early = True
                break
        bar.close()
        return self.history

    # history ----------------------------------------------------------------------------
    def _log(self, **values) -> None:
        for k, v in values.items():
            self.history[k].append(v)

    def _validate_and_log(self, bar) -> None:
        v = self.validate()
        self._log(val_step=self.step, val_loss=v["loss"], val_exact_match=v["exact_match"],
                  val_bleu=v["bleu"])
        if self.settings.verbose:
            bar.write(f"step {self.step}: val loss {v['loss']:.4f}  exact match "
                      f"{100 * v['exact_match']:.1f}%  BLEU {v['bleu']:.1f}")
