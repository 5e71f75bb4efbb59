"""Greedy decoding and beam search, one token a press of a button (notebook 08)."""

from __future__ import annotations

import math
from typing import Any, Dict

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from ..checks import check_float, check_int
from ..search import Beam, gnmt_length_penalty, inference, next_log_probs, source_memory
from .base import Explorer, slider
from ..data.tokenizers import Tokenizer
from ..model import Transformer
from .trained import ModelSource, encode_source, load_for_explorer


def decoding(
    model: ModelSource = None,
    text: str = "Friday, 5 March 2021",
    beam_size: int = 4,
    length_penalty: float = 0.6,
    top: int = 5,
) -> Explorer:
    """Decode one input a token at a time with a "next token" button: greedy's ``top``
    candidates with their probabilities, and beam search's hypotheses with their scores
    log P / lp (GNMT's length penalty, alpha = ``length_penalty``).

    The steps are those of :func:`~transformer_lib.search.greedy_decode` and
    :func:`~transformer_lib.search.beam_search` (the library's ``Beam``), without a cache.
    """
    controls = decoding_controls(text, beam_size, length_penalty)
    transformer, src_tok, tgt_tok = load_for_explorer(model)
    check_int(top, "top", 1, tgt_tok.vocab_size)
    max_len, bos_id, eos_id = transformer.config.max_len, tgt_tok.bos_id, tgt_tok.eos_id
    step, restart = widgets.Button(description="next token"), widgets.Button(description="restart")
    state: Dict[str, Any] = {}

    def draw(text, beam_size):
        if state.get("key") != (text, beam_size):  # new input: start again
            state.clear()
            step.disabled = True
            src = encode_source(text, src_tok, max_len)  # (1, S)
            state.update(
                key=(text, beam_size),
                stepper=StepDecoder(
                    transformer, src, beam_size, length_penalty, bos_id, eos_id, top
                ),
            )
        stepper = state["stepper"]
        step.disabled = stepper.done
        return plot_decoding_step(stepper, tgt_tok), step_message(stepper, tgt_tok)

    return _with_buttons(controls, draw, state, step, restart)


def _with_buttons(controls, draw, state: Dict[str, Any], step, restart) -> Explorer:
    """The decoding explorer with its buttons: "next token" takes one step of
    ``state["stepper"]`` and redraws, "restart" starts the decoding again."""

    def next_token(_):
        if "stepper" in state and _reported(explorer, state["stepper"].step):
            explorer.update()

    def start_again(_):
        state.clear()
        explorer.update()

    step.on_click(next_token)
    restart.on_click(start_again)
    explorer = Explorer("Decoding", controls, draw, extra=[widgets.HBox([step, restart])])
    explorer.buttons = {"next token": step, "restart": restart}
    return explorer


def decoding_controls(
    text: str, beam_size: int, length_penalty: float
) -> Dict[str, widgets.Widget]:
    """The decoding explorer's text box and beam-size slider, its arguments checked first."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    check_int(beam_size, "beam_size", 1, 8)  # the slider's range
    check_float(length_penalty, "length_penalty", 0.0)
    return {
        "text": widgets.Text(
            value=text,
            description="your input",
            continuous_update=False,
            style={"description_width": "initial"},
        ),
        "beam_size": slider(beam_size, 1, 8, "beam size K"),
    }


def step_message(stepper: StepDecoder, tgt_tok: Tokenizer) -> str:
    """The explorer's line under the figure: both outputs so far."""
    return (
        f"step {stepper.steps}: greedy {tgt_tok.decode(stepper.greedy[0].tolist())!r}, "
        f"beam's best {tgt_tok.decode(stepper.beam.best()[0].tolist())!r}"
        + ("; both finished" if stepper.done else "")
    )


def _reported(explorer: Explorer, action) -> bool:
    """Run a button's action; True if it worked, else its error becomes the explorer's
    message (a button's callback that raises would otherwise do nothing visible)."""
    try:
        action()
        return True
    except Exception as err:  # shown, never lost
        explorer.say(f"{type(err).__name__}: {err}", error=True)
        return False


class StepDecoder:
    """Greedy decoding and beam search on one source, advanced one token per ``step()``."""

    def __init__(
        self,
        model: Transformer,
        src: torch.Tensor,
        beam_size: int,
        alpha: float,
        bos_id: int,
        eos_id: int,
        top: int = 5,
    ) -> None:
        check_int(top, "top", 1, model.config.tgt_vocab_size)
        self.model, self.eos, self.top, self.steps = model, eos_id, top, 0
        with inference(model):
            self.memory, self.src_mask = source_memory(model, src, None)  # (1, S, D)
        self.greedy = torch.full((1, 1), bos_id)  # (1, t)
        self.candidates: Any = None  # greedy's last (log-probs, ids), top first
        self.beam = Beam(1, beam_size, bos_id, eos_id, model.config.pad_id, alpha, src.device)
        self.max_len = model.config.max_len

    @property
    def greedy_done(self) -> bool:
        return bool(self.greedy[0, -1] == self.eos) or self.steps >= self.max_len

    @property
    def done(self) -> bool:
        return self.greedy_done and (bool(self.beam.finished.all()) or self.steps >= self.max_len)

    def step(self) -> None:
        if self.done:
            return
        K = self.beam.K
        with inference(self.model):
            if not self.greedy_done:
                log_probs = next_log_probs(
                    self.model, self.greedy, self.memory, self.src_mask, None
                )[0]  # (V,)
                self.candidates = log_probs.topk(self.top)
                self.greedy = torch.cat((self.greedy, self.candidates.indices[:1][None]), 1)
            if not bool(self.beam.finished.all()):
                log_probs = next_log_probs(
                    self.model,
                    self.beam.tokens,
                    self.memory.expand(K, -1, -1),
                    self.src_mask.expand(K, -1, -1, -1),
                    None,
                )
                self.beam.advance(log_probs, self.steps + 1)  # (K, V) in
        self.steps += 1


def plot_decoding_step(stepper: StepDecoder, tokenizer: Tokenizer) -> plt.Figure:
    """Greedy's candidates at the last step (left) and the beam's hypotheses (right)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained")
    _plot_greedy_candidates(left, stepper, tokenizer)
    _plot_beam_hypotheses(right, stepper, tokenizer)
    return fig


def _plot_greedy_candidates(ax, stepper: StepDecoder, tokenizer: Tokenizer) -> None:
    """Greedy's ``top`` candidates at the last step, with their probabilities."""
    greedy_prefix = tokenizer.decode(stepper.greedy[0, :-1].tolist())
    if stepper.candidates is None:
        ax.text(0.5, 0.5, 'press "next token"', ha="center", va="center")
    else:
        probs = stepper.candidates.values.exp().tolist()
        labels = [repr(tokenizer.id_to_token(i)) for i in stepper.candidates.indices.tolist()]
        colours = ["tab:orange"] + ["tab:blue"] * (len(probs) - 1)
        bars = ax.barh(range(len(probs)), probs, color=colours)
        ax.bar_label(bars, fmt="%.3f", padding=3)
        ax.set_yticks(range(len(probs)), labels)
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
    ax.set_xlabel("probability (orange: greedy's pick)")
    ax.set_ylabel("candidate next token")
    ax.set_title(f"greedy, step {stepper.steps}: after {greedy_prefix!r}", fontsize="medium")


def _plot_beam_hypotheses(ax, stepper: StepDecoder, tokenizer: Tokenizer) -> None:
    """The beam's hypotheses, ranked by their score log P / lp (GNMT's length penalty)."""
    beam = stepper.beam
    ranked = (beam.scores / gnmt_length_penalty(beam.lengths, beam.alpha))[0]  # (K,)
    keep = [k for k in range(beam.K) if math.isfinite(float(ranked[k]))]
    if stepper.steps == 0 or not keep:
        ax.text(0.5, 0.5, 'press "next token"', ha="center", va="center")
    else:
        order = sorted(keep, key=lambda k: -float(ranked[k]))
        labels = [
            repr(tokenizer.decode(beam.tokens[k].tolist()))
            + (" </s>" if bool(beam.finished[0, k]) else "")
            for k in order
        ]
        bars = ax.barh(range(len(order)), [float(ranked[k]) for k in order], color="tab:green")
        ax.bar_label(bars, fmt="%.2f", padding=3)
        ax.margins(x=0.15)
        ax.set_yticks(range(len(order)), labels)
        ax.invert_yaxis()
    ax.set_xlabel("score log P / lp (0 is best)")
    ax.set_ylabel("hypothesis")
    ax.set_title(
        f"beam search, K = {beam.K}, alpha = {beam.alpha}: hypotheses kept", fontsize="medium"
    )
