"""Interactive explorers for the notebooks: sliders, text boxes and buttons (ipywidgets) that
redraw a figure of :mod:`transformer_lib.plotting`.

Each is one call in a notebook cell, after the static figure that teaches the same point::

    from transformer_lib import explorers
    explorers.positional_encoding()     # d_model, position, dimension: table, curves, similarity
    explorers.masks()                   # lengths and padding: padding, causal, combined masks
    explorers.attention()               # your own date: every layer, head and kind of attention
    explorers.decoding()                # "next token": greedy's and beam's candidates per step

Every explorer is an :class:`Explorer`: ``controls`` (the widgets, by name), ``image`` (the
figure as PNG), ``message`` (a line of text) and ``update()``, which redraws from the
controls' values; it runs whenever a control changes. Bad input (a character the model's
vocabulary lacks, an empty text box) is reported in ``message``, never as a traceback.
Figures are drawn off screen and closed, so an explorer never adds a figure to a cell.
Needs ``ipywidgets`` (in the ``dev`` extra).
"""
from __future__ import annotations

import html
import io
import math
import warnings
from pathlib import Path
from typing import Callable, Dict, Optional

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from . import plotting
from .decoding import (Beam, _inference, _next_log_probs, _source, gnmt_length_penalty,
                       greedy_decode)
from .masks import causal_mask, combine, padding_mask
from .positional import sinusoidal_table

DATES_CHECKPOINT = Path(__file__).resolve().parent.parent / "checkpoints" / "dates.pt"
KINDS = {"encoder self-attention": "encoder", "decoder self-attention": "decoder_self",
         "cross-attention": "decoder_cross"}


class Explorer:
    """Controls above a message line and a figure; ``update()`` redraws from the controls.

    ``draw(**values)`` returns ``(figure, message)`` and may raise ``ValueError`` or
    ``TypeError``: then the error's text becomes the message and the figure is hidden.
    """

    def __init__(self, name: str, controls: Dict[str, widgets.Widget],
                 draw: Callable[..., Optional[plt.Figure]], extra=()):
        self.name, self.controls, self._draw = name, controls, draw
        self.message = widgets.HTML()
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        rows = [widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap"))]
        self.widget = widgets.VBox(rows + list(extra) + [self.message, self.image])
        self._busy = False
        for control in controls.values():
            control.observe(lambda _: self.update(), names="value")
        self.update()

    def values(self) -> dict:
        return {name: c.value for name, c in self.controls.items() if hasattr(c, "value")}

    def update(self) -> None:
        if self._busy:                     # a control changed by draw() itself: already drawing
            return
        self._busy = True
        try:
            fig, text = self._draw(**self.values())
            self.image.value = figure_png(fig)
            self.image.layout.display = None
            self.say(text)
        except (ValueError, TypeError) as err:
            self.say(str(err), error=True)
            self.image.layout.display = "none"
        finally:
            self._busy = False

    def say(self, text: str, error: bool = False) -> None:
        style = "color:#b00020" if error else ""
        self.message.value = f'<span style="{style}">{html.escape(text)}</span>'

    def _repr_mimebundle_(self, **kwargs):
        data = self.widget._repr_mimebundle_(**kwargs)       # the widget view and a text repr
        data["text/plain"] = (f"{self.name} explorer (interactive: run this cell in "
                              "JupyterLab to use it)")      # the same text every run
        return data


def figure_png(fig: plt.Figure) -> bytes:
    """The figure as PNG bytes at 100 dpi; the figure is closed."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():           # a character DejaVu Sans lacks: drawn as a box
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        fig.savefig(buffer, format="png", dpi=100, facecolor="white")
    plt.close(fig)
    return buffer.getvalue()


def _slider(value, low, high, description, step=1):
    return widgets.IntSlider(value=value, min=low, max=high, step=step, description=description,
                             continuous_update=False, style={"description_width": "initial"})


# ----------------------------------------------------------------------------------------
# Positional encoding (notebook 02)

def positional_encoding(d_model: int = 64, position: int = 20, dimension: int = 6,
                        max_len: int = 128) -> Explorer:
    """Sliders for d_model, a position and a dimension: the table's heatmap, the chosen
    dimension's (sin, cos) pair against position, and the chosen position's similarity to
    every other against their distance, all redrawn together."""
    controls = {"d_model": _slider(d_model, 8, 512, "d_model", step=8),
                "position": _slider(position, 0, max_len - 1, "position"),
                "dimension": _slider(dimension, 0, d_model - 1, "dimension")}

    def draw(d_model, position, dimension):
        controls["dimension"].max = d_model - 1                     # may lower the dimension
        dimension = controls["dimension"].value
        table = sinusoidal_table(max_len, d_model)                  # (L, D)
        fig = plt.figure(figsize=(10, 6.4), layout="constrained")
        grid = fig.add_gridspec(2, 2, height_ratios=(1.1, 1))
        heat, curves, sims = (fig.add_subplot(grid[0, :]), fig.add_subplot(grid[1, 0]),
                              fig.add_subplot(grid[1, 1]))
        plotting.positional_heatmap(table, ax=heat, title=f"PE table, d_model = {d_model} "
                                    "(lines: the chosen position and dimension)")
        heat.axhline(position, color="black", linewidth=1)
        heat.axvline(dimension, color="black", linewidth=1, linestyle="--")
        pair = dimension - dimension % 2                            # the pair's sin column
        wavelength = 2 * math.pi * 10000 ** (pair / d_model)
        plotting.positional_curves(table, [pair, pair + 1], ax=curves, title=(
            f"dims {pair}, {pair + 1} (pair i = {pair // 2}): wavelength {wavelength:,.1f}"))
        curves.axvline(position, color="black", linewidth=1)
        plotting.positional_similarity(table, position, ax=sims)
        return fig, ""

    return Explorer("Positional-encoding", controls, draw)


# ----------------------------------------------------------------------------------------
# Masks (notebook 03, 05)

def masks(src_len: int = 6, tgt_len: int = 5, src_pad: int = 2, tgt_pad: int = 1,
          longest: int = 12) -> Explorer:
    """Sliders for the source and target lengths and how many of their positions are
    padding: the source padding mask, the causal mask, the two combined (decoder
    self-attention) and the cross-attention mask, queries down, keys across."""
    controls = {"src_len": _slider(src_len, 1, longest, "source length"),
                "src_pad": _slider(src_pad, 0, src_len - 1, "source padding"),
                "tgt_len": _slider(tgt_len, 1, longest, "target length"),
                "tgt_pad": _slider(tgt_pad, 0, tgt_len - 1, "target padding")}

    def draw(src_len, src_pad, tgt_len, tgt_pad):
        controls["src_pad"].max, controls["tgt_pad"].max = src_len - 1, tgt_len - 1
        src_pad, tgt_pad = controls["src_pad"].value, controls["tgt_pad"].value
        src, s_tokens = _padded(src_len, src_pad, "s")               # (1, S)
        tgt, t_tokens = _padded(tgt_len, tgt_pad, "t")               # (1, T)
        src_keys = padding_mask(src, 0)                              # (1, 1, 1, S)
        panels = [("source padding\n(encoder self-attention)",
                   src_keys.expand(1, 1, src_len, src_len), s_tokens, s_tokens),
                  ("causal", causal_mask(tgt_len), t_tokens, t_tokens),
                  ("causal & target padding\n(decoder self-attention)",
                   combine(padding_mask(tgt, 0), causal_mask(tgt_len)), t_tokens, t_tokens),
                  ("source padding\n(cross-attention)",
                   src_keys.expand(1, 1, tgt_len, src_len), t_tokens, s_tokens)]
        fig, axes = plt.subplots(1, 4, figsize=(10, 3.6), layout="constrained")
        for ax, (title, mask, rows, cols) in zip(axes, panels):
            plotting.mask_grid(mask, rows, cols, ax=ax, title=title)
            ax.set_ylabel(f"query ({'source' if rows is s_tokens else 'target'})")
            ax.set_xlabel(f"key ({'source' if cols is s_tokens else 'target'})")
        fig.suptitle("Masks, True = may attend (filled); white = blocked", fontsize="medium")
        return fig, ""

    return Explorer("Mask", controls, draw)


def _padded(length: int, pad: int, prefix: str):
    """Ids (1, length) whose last ``pad`` positions are padding (id 0), and their labels."""
    ids = torch.tensor([[4] * (length - pad) + [0] * pad])                   # (1, L)
    return ids, [f"{prefix}{i}" for i in range(length - pad)] + ["pad"] * pad


# ----------------------------------------------------------------------------------------
# The trained date model (notebook 07)

def _load(model):
    """(model, src_tokenizer, tgt_tokenizer) from a checkpoint path or such a tuple."""
    if isinstance(model, tuple) and len(model) == 3:
        return model
    from .training.checkpoint import load_model
    path = Path(DATES_CHECKPOINT if model is None else model)
    if not path.is_file():
        raise FileNotFoundError(f"model must be a checkpoint file or (model, src_tokenizer, "
                                f"tgt_tokenizer); no file at {path}")
    return load_model(path)


def encode_source(text: str, tokenizer, max_len: int) -> torch.Tensor:
    """One source text as (1, S) ids; ValueError with a learner-readable reason otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("type a date in the text box (it is empty)")
    unknown = sorted({ch for ch in text if tokenizer.unk_id in tokenizer.encode(ch)})
    if unknown:
        raise ValueError(f"the model's vocabulary has no {', '.join(map(repr, unknown))}: it "
                         "only knows the characters of its training dates (English, French, "
                         "German and Spanish); it would read them as <unk>")
    ids = tokenizer.encode(text)
    if len(ids) > max_len:
        raise ValueError(f"the text has {len(ids)} tokens; the model reads at most {max_len}")
    return torch.tensor([ids])                                               # (1, S)


def _label(tokenizer, i: int) -> str:
    token = tokenizer.id_to_token(i)
    return "␣" if token == " " else token


def attention(model=None, text: str = "Friday, 5 March 2021") -> Explorer:
    """A text box for your own input, its greedy translation, and one attention heatmap of
    the trained model, picked by kind (encoder self, decoder self, cross), layer and head.

    ``model``: a checkpoint path (default ``checkpoints/dates.pt``) or the
    ``(model, src_tokenizer, tgt_tokenizer)`` of ``training.checkpoint.load_model``.
    """
    model, src_tok, tgt_tok = _load(model)
    c = model.config
    dropdown = dict(style={"description_width": "initial"})
    controls = {"text": widgets.Text(value=text, description="your input",
                                     continuous_update=False, **dropdown),
                "kind": widgets.Dropdown(options=list(KINDS.items()), value="decoder_cross",
                                         description="kind", **dropdown),
                "layer": widgets.Dropdown(options=list(range(c.N)), description="layer",
                                          **dropdown),
                "head": widgets.Dropdown(options=list(range(c.h)), description="head",
                                         **dropdown)}
    memo = {}

    def run(text):
        if text not in memo:
            src = encode_source(text, src_tok, c.max_len)                    # (1, S)
            out = greedy_decode(model, src, c.max_len, tgt_tok.bos_id, tgt_tok.eos_id)
            bos = torch.full((1, 1), tgt_tok.bos_id)
            y_in = torch.cat((bos, out[:, :-1]), dim=1)                      # (1, T)
            with _inference(model):
                _, weights = model(src, y_in, need_weights=True)
            ins = [_label(tgt_tok, i) for i in y_in[0].tolist()]
            rows = [f"{a}→{_label(tgt_tok, b)}" for a, b in zip(ins, out[0].tolist())]
            memo.clear()
            memo[text] = (tgt_tok.decode(out[0].tolist()), weights,
                          [_label(src_tok, i) for i in src[0].tolist()], ins, rows)
        return memo[text]

    def draw(text, kind, layer, head):
        translation, weights, source, ins, rows = run(text)
        queries, keys = {"encoder": (source, source), "decoder_self": (rows, ins),
                         "decoder_cross": (rows, source)}[kind]
        w = weights[kind][layer][0, head:head + 1]                           # (1, T_q, T_k)
        cell = min(0.3, 7 / max(len(queries), len(keys)))
        fig = plotting.attention_heads(w, queries, keys, cell=cell)
        ax = fig.axes[0]
        ax.set_title(f"{next(k for k, v in KINDS.items() if v == kind)}, layer {layer}, "
                     f"head {head}", fontsize="medium")
        ax.set_xlabel("key: " + ("decoder input" if kind == "decoder_self" else "source"))
        ax.set_ylabel("query: " + ("source" if kind == "encoder" else "input→predicted"))
        return fig, f"translation: {translation}"

    return Explorer("Attention", controls, draw)


def decoding(model=None, text: str = "Friday, 5 March 2021", beam_size: int = 4,
             length_penalty: float = 0.6, top: int = 5) -> Explorer:
    """Decode one input a token at a time with a "next token" button: greedy's ``top``
    candidates with their probabilities, and beam search's hypotheses with their scores
    log P / lp (GNMT's length penalty, alpha = ``length_penalty``).

    The steps are those of :func:`~transformer_lib.decoding.greedy_decode` and
    :func:`~transformer_lib.decoding.beam_search` (the library's ``Beam``), without a cache.
    """
    model, src_tok, tgt_tok = _load(model)
    controls = {"text": widgets.Text(value=text, description="your input",
                                     continuous_update=False,
                                     style={"description_width": "initial"}),
                "beam_size": _slider(beam_size, 1, 8, "beam size K")}
    step, restart = widgets.Button(description="next token"), widgets.Button(description="restart")
    state = {}

    def draw(text, beam_size):
        if state.get("key") != (text, beam_size):                  # new input: start again
            state.clear()
            step.disabled = True
            src = encode_source(text, src_tok, model.config.max_len)             # (1, S)
            state.update(key=(text, beam_size), stepper=StepDecoder(
                model, src, beam_size, length_penalty, tgt_tok.bos_id, tgt_tok.eos_id, top))
        stepper = state["stepper"]
        step.disabled = stepper.done
        return plot_decoding_step(stepper, tgt_tok), (
            f"step {stepper.steps}: greedy {tgt_tok.decode(stepper.greedy[0].tolist())!r}, "
            f"beam's best {tgt_tok.decode(stepper.beam.best()[0].tolist())!r}"
            + ("; both finished" if stepper.done else ""))

    def next_token(_):
        if "stepper" in state:
            state["stepper"].step()
            explorer.update()

    def start_again(_):
        state.clear()
        explorer.update()

    step.on_click(next_token)
    restart.on_click(start_again)
    explorer = Explorer("Decoding", controls, draw, extra=[widgets.HBox([step, restart])])
    explorer.buttons = {"next token": step, "restart": restart}
    return explorer


class StepDecoder:
    """Greedy decoding and beam search on one source, advanced one token per ``step()``."""

    def __init__(self, model, src: torch.Tensor, beam_size: int, alpha: float,
                 bos_id: int, eos_id: int, top: int = 5):
        self.model, self.eos, self.top, self.steps = model, eos_id, top, 0
        with _inference(model):
            self.memory, self.src_mask = _source(model, src, None)           # (1, S, D)
        self.greedy = torch.full((1, 1), bos_id)                             # (1, t)
        self.candidates = None                     # greedy's last (log-probs, ids), top first
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
        with _inference(self.model):
            if not self.greedy_done:
                log_probs = _next_log_probs(self.model, self.greedy, self.memory,
                                            self.src_mask, None)[0]          # (V,)
                self.candidates = log_probs.topk(self.top)
                self.greedy = torch.cat((self.greedy, self.candidates.indices[:1][None]), 1)
            if not bool(self.beam.finished.all()):
                log_probs = _next_log_probs(self.model, self.beam.tokens,
                                            self.memory.expand(K, -1, -1),
                                            self.src_mask.expand(K, -1, -1, -1), None)
                self.beam.advance(log_probs, self.steps + 1)                 # (K, V) in
        self.steps += 1


def plot_decoding_step(stepper: StepDecoder, tokenizer) -> plt.Figure:
    """Greedy's candidates at the last step (left) and the beam's hypotheses (right)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained")
    greedy_prefix = tokenizer.decode(stepper.greedy[0, :-1].tolist())
    if stepper.candidates is None:
        left.text(0.5, 0.5, 'press "next token"', ha="center", va="center")
    else:
        probs = stepper.candidates.values.exp().tolist()
        labels = [repr(tokenizer.id_to_token(i)) for i in stepper.candidates.indices.tolist()]
        colours = ["tab:orange"] + ["tab:blue"] * (len(probs) - 1)
        bars = left.barh(range(len(probs)), probs, color=colours)
        left.bar_label(bars, fmt="%.3f", padding=3)
        left.set_yticks(range(len(probs)), labels)
        left.invert_yaxis()
        left.set_xlim(0, 1)
    left.set_xlabel("probability (orange: greedy's pick)")
    left.set_ylabel("candidate next token")
    left.set_title(f"greedy, step {stepper.steps}: after {greedy_prefix!r}", fontsize="medium")
    beam = stepper.beam
    ranked = (beam.scores / gnmt_length_penalty(beam.lengths, beam.alpha))[0]  # (K,)
    keep = [k for k in range(beam.K) if math.isfinite(float(ranked[k]))]
    if stepper.steps == 0 or not keep:
        right.text(0.5, 0.5, 'press "next token"', ha="center", va="center")
    else:
        order = sorted(keep, key=lambda k: -float(ranked[k]))
        labels = [repr(tokenizer.decode(beam.tokens[k].tolist()))
                  + (" </s>" if bool(beam.finished[0, k]) else "") for k in order]
        bars = right.barh(range(len(order)), [float(ranked[k]) for k in order],
                          color="tab:green")
        right.bar_label(bars, fmt="%.2f", padding=3)
        right.margins(x=0.15)
        right.set_yticks(range(len(order)), labels)
        right.invert_yaxis()
    right.set_xlabel("score log P / lp (0 is best)")
    right.set_ylabel("hypothesis")
    right.set_title(f"beam search, K = {beam.K}, alpha = {beam.alpha}: hypotheses kept",
                    fontsize="medium")
    return fig

