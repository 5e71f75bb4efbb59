"""Interactive explorers for the notebooks: sliders, text boxes and buttons (ipywidgets) that
redraw a figure of :mod:`transformer_lib.plotting`. Each is one call in a notebook cell::

    from transformer_lib import explorers
    explorers.positional_encoding()   # d_model, position, dimension: table, curves, similarity
    explorers.masks()                 # lengths and padding: padding, causal, combined masks
    explorers.attention()             # your own date: every layer, head and kind of attention
    explorers.attention("bible-en-fr", text="...")   # your own English sentence
    explorers.decoding()              # "next token": greedy's and beam's candidates per step

Every explorer is an :class:`Explorer`: ``controls`` (the widgets, by name), ``image`` (the
figure as PNG), ``message`` (a line of text) and ``update()``, which redraws from the
controls' values whenever one changes. Bad input (a character outside the model's
vocabulary, an empty text box) is reported in ``message``, never as a traceback.
"""
from __future__ import annotations

import html
import io
import math
import os
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple, Union, cast

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from . import plotting
from .checks import check_float, check_int
from .masks import causal_mask, padding_mask
from .model import Transformer
from .positional import sinusoidal_table
from .search import Beam, gnmt_length_penalty, greedy_decode, inference, next_log_probs
from .tokenizers import Tokenizer

KINDS = {"encoder self-attention": "encoder", "decoder self-attention": "decoder_self",
         "cross-attention": "decoder_cross"}
Loaded = Tuple[Transformer, Tokenizer]
ModelSource = Union[None, str, "os.PathLike[str]", Loaded]


class Explorer:
    """Controls above a message line and a figure; ``update()`` redraws from the controls.

    ``draw(**values)`` returns ``(figure, message)``; an error it raises becomes the message
    (and hides the figure): in a widget callback a raised error would be lost.
    """

    def __init__(self, name: str, controls: Dict[str, widgets.Widget],
                 draw: Callable[..., Tuple[plt.Figure, str]],
                 buttons: Sequence[widgets.Button] = ()) -> None:
        self.name, self.controls, self.draw = name, controls, draw
        self.message = widgets.HTML()
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.buttons = {b.description: b for b in buttons}
        rows = [widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap"))]
        rows += [widgets.HBox(list(buttons))] if buttons else []
        self.widget = widgets.VBox(rows + [self.message, self.image])
        self.busy = False
        for control in controls.values():
            control.observe(lambda _: self.update(), names="value")
        self.update()

    def update(self) -> None:
        if self.busy:                        # a control changed by draw() itself
            return
        self.busy = True
        try:
            fig, text = self.draw(**{n: c.value for n, c in self.controls.items()})
            self.image.value = figure_png(fig)
            self.image.layout.display = None
            self.say(text)
        except Exception as err:
            known = isinstance(err, (ValueError, TypeError))
            self.say(str(err) if known else f"{type(err).__name__}: {err}", error=True)
            self.image.layout.display = "none"
        finally:
            self.busy = False

    def say(self, text: str, error: bool = False) -> None:
        style = "color:#b00020" if error else ""
        self.message.value = f'<span style="{style}">{html.escape(text)}</span>'

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        data = self.widget._repr_mimebundle_(**kwargs)
        data["text/plain"] = f"{self.name} explorer (interactive: run this cell in JupyterLab)"
        return data


def figure_png(fig: plt.Figure) -> bytes:
    """The figure as PNG bytes at 100 dpi; the figure is closed."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():          # a character DejaVu Sans lacks: drawn as a box
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        fig.savefig(buffer, format="png", dpi=100, facecolor="white")
    plt.close(fig)
    return buffer.getvalue()


def slider(value: int, low: int, high: int, description: str, step: int = 1) -> widgets.IntSlider:
    return widgets.IntSlider(value=value, min=low, max=high, step=step, description=description,
                             continuous_update=False, style={"description_width": "initial"})


def text_box(text: Any) -> widgets.Text:
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return widgets.Text(value=text, description="your input", continuous_update=False,
                        style={"description_width": "initial"})


# Positional encoding (notebook 02) -----------------------------------------------------
def positional_encoding(d_model: int = 64, position: int = 20, dimension: int = 6,
                        max_len: int = 128) -> Explorer:
    """Sliders for d_model, a position and a dimension: the table's heatmap, the chosen
    dimension's (sin, cos) pair against position, and the chosen position's similarity to
    every other against their distance."""
    check_int(max_len, "max_len", 1, 10_000)
    if check_int(d_model, "d_model", 8, 512) % 8:
        raise ValueError(f"d_model must be a multiple of 8 (the slider's step), got {d_model}")
    check_int(position, "position", 0, max_len - 1)
    check_int(dimension, "dimension", 0, d_model - 1)
    controls = {"d_model": slider(d_model, 8, 512, "d_model", step=8),
                "position": slider(position, 0, max_len - 1, "position"),
                "dimension": slider(dimension, 0, d_model - 1, "dimension")}

    def draw(d_model: int, position: int, dimension: int) -> Tuple[plt.Figure, str]:
        controls["dimension"].max = d_model - 1                   # may lower the dimension
        dimension = controls["dimension"].value
        table = sinusoidal_table(max_len, d_model)                           # (L, D)
        fig = plt.figure(figsize=(10, 6.4), layout="constrained")
        grid = fig.add_gridspec(2, 2, height_ratios=(1.1, 1))
        heat, curves, sims = (fig.add_subplot(grid[0, :]), fig.add_subplot(grid[1, 0]),
                              fig.add_subplot(grid[1, 1]))
        plotting.positional_heatmap(table, ax=heat, title=f"PE table, d_model = {d_model} "
                                    "(lines: the chosen position and dimension)")
        heat.axhline(position, color="black", linewidth=1)
        heat.axvline(dimension, color="black", linewidth=1, linestyle="--")
        pair = dimension - dimension % 2                                     # the sin column
        wavelength = 2 * math.pi * 10000 ** (pair / d_model)
        plotting.positional_curves(table, [pair, pair + 1], ax=curves, title=(
            f"dims {pair}, {pair + 1} (pair i = {pair // 2}): wavelength {wavelength:,.1f}"))
        curves.axvline(position, color="black", linewidth=1)
        plotting.positional_similarity(table, position, ax=sims)
        return fig, ""

    return Explorer("Positional-encoding", controls, draw)


# Masks (notebooks 03, 06) -----------------------------------------------------------------
def masks(src_len: int = 6, tgt_len: int = 5, src_pad: int = 2, tgt_pad: int = 1,
          longest: int = 12) -> Explorer:
    """Sliders for the source and target lengths and their padding: the source padding mask,
    the causal mask, the two combined (decoder self-attention) and the cross-attention mask."""
    check_int(longest, "longest", 1, 64)
    check_int(src_len, "src_len", 1, longest)
    check_int(tgt_len, "tgt_len", 1, longest)
    check_int(src_pad, "src_pad", 0, src_len - 1)
    check_int(tgt_pad, "tgt_pad", 0, tgt_len - 1)
    controls = {"src_len": slider(src_len, 1, longest, "source length"),
                "src_pad": slider(src_pad, 0, src_len - 1, "source padding"),
                "tgt_len": slider(tgt_len, 1, longest, "target length"),
                "tgt_pad": slider(tgt_pad, 0, tgt_len - 1, "target padding")}

    def padded(length: int, pad: int, prefix: str) -> Tuple[torch.Tensor, List[str]]:
        labels = [f"{prefix}{i}" for i in range(length - pad)] + ["pad"] * pad
        return torch.tensor([[4] * (length - pad) + [0] * pad]), labels      # (1, L)

    def draw(src_len: int, src_pad: int, tgt_len: int, tgt_pad: int) -> Tuple[plt.Figure, str]:
        controls["src_pad"].max, controls["tgt_pad"].max = src_len - 1, tgt_len - 1
        (src, s), (tgt, t) = (padded(src_len, controls["src_pad"].value, "s"),
                              padded(tgt_len, controls["tgt_pad"].value, "t"))
        keys = padding_mask(src, 0)                                          # (1, 1, 1, S)
        panels = [("source padding\n(encoder self-attention)", keys.expand(1, 1, src_len, src_len),
                   s, s, "source", "source"),
                  ("causal", causal_mask(tgt_len), t, t, "target", "target"),
                  ("causal & target padding\n(decoder self-attention)",
                   padding_mask(tgt, 0) & causal_mask(tgt_len), t, t, "target", "target"),
                  ("source padding\n(cross-attention)", keys.expand(1, 1, tgt_len, src_len),
                   t, s, "target", "source")]
        fig, axes = plt.subplots(1, 4, figsize=(10, 3.6), layout="constrained")
        for ax, (title, mask, rows, cols, q, k) in zip(axes, panels):
            plotting.mask_grid(mask, rows, cols, ax=ax, title=title)
            ax.set(ylabel=f"query ({q})", xlabel=f"key ({k})")
        fig.suptitle("Masks, True = may attend (filled); white = blocked", fontsize="medium")
        return fig, ""

    return Explorer("Mask", controls, draw)


# A trained model (notebooks 08, 09) ------------------------------------------------------
def load_for_explorer(model: ModelSource) -> Loaded:
    """(model, tokenizer) from such a pair, a checkpoint path, or the name of a shipped
    checkpoint (``"dates"``, the default, or ``"bible-en-fr"``)."""
    from .checkpoint import SHIPPED, load_model, shipped_checkpoint

    if isinstance(model, tuple):
        if len(model) != 2 or not isinstance(model[0], Transformer) or not isinstance(
                model[1], Tokenizer):
            raise TypeError("model must be (model, tokenizer) as load_model returns")
        return model
    if model is None or model in SHIPPED:
        return load_model(shipped_checkpoint(model or "dates"))
    if not isinstance(model, (str, os.PathLike)) or not Path(model).is_file():
        raise TypeError(f"model must be None, a shipped checkpoint's name {sorted(SHIPPED)}, a "
                        f"checkpoint file or (model, tokenizer), got {model!r:.60}")
    return load_model(model)


def encode_source(text: str, tokenizer: Tokenizer, max_len: int) -> torch.Tensor:
    """One source text as (1, S) ids; ValueError with a learner-readable reason otherwise."""
    if not text.strip():
        raise ValueError("type a sentence in the text box (it is empty)")
    unknown = sorted({ch for ch in text if tokenizer.unk_id in tokenizer.encode(ch)})
    if unknown:
        raise ValueError(f"the model's vocabulary has no {', '.join(map(repr, unknown))}: it "
                         "knows only the characters of its training texts")
    ids = tokenizer.encode(text)
    if len(ids) > max_len:
        raise ValueError(f"the text has {len(ids)} tokens; the model reads at most {max_len}")
    return torch.tensor([ids])                                               # (1, S)


def attention(model: ModelSource = None, text: str = "Friday, 5 March 2021") -> Explorer:
    """A text box for your own input, its greedy translation, and one attention heatmap of
    the trained model, picked by kind (encoder self, decoder self, cross), layer and head."""
    box = text_box(text)
    transformer, tok = load_for_explorer(model)
    c, memo = transformer.config, {}  # type: Tuple[Any, Dict[str, Any]]
    menu = dict(style={"description_width": "initial"})
    controls = {"text": box,
                "kind": widgets.Dropdown(options=list(KINDS.items()), value="decoder_cross",
                                         description="kind", **menu),
                "layer": widgets.Dropdown(options=[(str(i + 1), i) for i in range(c.N)],
                                          description="layer", **menu),
                "head": widgets.Dropdown(options=[(str(i + 1), i) for i in range(c.h)],
                                         description="head", **menu)}

    def label(i: int) -> str:
        return "␣" if tok.id_to_token(i) == " " else tok.id_to_token(i)

    def translated(text: str) -> Tuple[str, Dict[str, Any], List[str], List[str], List[str]]:
        if text not in memo:                 # translate, then one pass for the weights
            src = encode_source(text, tok, c.max_len)                        # (1, S)
            out = greedy_decode(transformer, src, c.max_len, tok.bos_id, tok.eos_id)
            y_in = torch.cat((torch.full((1, 1), tok.bos_id), out[:, :-1]), dim=1)  # (1, T)
            with inference(transformer):
                _, weights = transformer(src, y_in, need_weights=True)
            ins = [label(i) for i in y_in[0].tolist()]
            rows = [f"{a}→{label(b)}" for a, b in zip(ins, out[0].tolist())]
            memo.clear()
            memo[text] = (tok.decode(out[0]), weights, [label(i) for i in src[0].tolist()],
                          ins, rows)
        return memo[text]

    def draw(text: str, kind: str, layer: int, head: int) -> Tuple[plt.Figure, str]:
        translation, weights, source, ins, rows = translated(text)
        queries, keys = {"encoder": (source, source), "decoder_self": (rows, ins),
                         "decoder_cross": (rows, source)}[kind]
        name = next(k for k, v in KINDS.items() if v == kind)
        fig = plotting.attention_heads(
            weights[kind][layer][0, head:head + 1], queries, keys,
            cell=min(0.3, 9 / max(len(queries), len(keys))),
            query_label="query: " + ("source" if kind == "encoder" else "input→predicted"),
            key_label="key: " + ("decoder input" if kind == "decoder_self" else "source"))
        fig.axes[0].set_title(f"{name}, layer {layer + 1}, head {head + 1}", fontsize="medium")
        return fig, f"translation: {translation}"

    return Explorer("Attention", controls, draw)


class StepDecoder:
    """Greedy decoding and beam search on one source, advanced one token per ``step()``."""

    def __init__(self, model: Transformer, src: torch.Tensor, beam_size: int, alpha: float,
                 bos_id: int, eos_id: int, top: int = 5) -> None:
        self.model, self.eos, self.steps = model, eos_id, 0
        self.top = check_int(top, "top", 1, model.config.tgt_vocab_size)
        self.src_mask = padding_mask(src, model.config.pad_id)              # (1, 1, 1, S)
        with inference(model):
            self.memory = cast(torch.Tensor, model.encode(src, self.src_mask))  # (1, S, D)
        self.greedy = torch.full((1, 1), bos_id)                             # (1, t)
        self.candidates: Any = None            # greedy's last (log-probs, ids), best first
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
                log_probs = next_log_probs(self.model, self.greedy, self.memory, self.src_mask,
                                           None)[0]                          # (V,)
                self.candidates = log_probs.topk(self.top)
                self.greedy = torch.cat((self.greedy, self.candidates.indices[:1][None]), 1)
            if not bool(self.beam.finished.all()):
                log_probs = next_log_probs(self.model, self.beam.tokens,
                                           self.memory.expand(K, -1, -1),
                                           self.src_mask.expand(K, -1, -1, -1), None)
                self.beam.advance(log_probs, self.steps + 1)                 # (K, V) in
        self.steps += 1

    def figure(self, tok: Tokenizer) -> plt.Figure:
        """Greedy's candidates at the last step (left) and the beam's hypotheses (right)."""
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained")
        for ax in (left, right):
            if self.steps == 0:
                ax.text(0.5, 0.5, 'press "next token"', ha="center", va="center")
        if self.candidates is not None:
            probs = self.candidates.values.exp().tolist()
            bars = left.barh(range(len(probs)), probs,
                             color=["tab:orange"] + ["tab:blue"] * (len(probs) - 1))
            left.bar_label(bars, fmt="%.3f", padding=3)
            left.set_yticks(range(len(probs)), [repr(tok.id_to_token(i))
                                                for i in self.candidates.indices.tolist()])
            left.invert_yaxis()
            left.set_xlim(0, 1)
        prefix = tok.decode(self.greedy[0, :-1])
        left.set(xlabel="probability (orange: greedy's pick)", ylabel="candidate next token")
        left.set_title(f"greedy, step {self.steps}: after {prefix!r}", fontsize="medium")
        beam = self.beam
        ranked = (beam.scores / gnmt_length_penalty(beam.lengths, beam.alpha))[0]  # (K,)
        order = sorted((k for k in range(beam.K) if math.isfinite(float(ranked[k]))),
                       key=lambda k: -float(ranked[k]))
        if self.steps:
            bars = right.barh(range(len(order)), [float(ranked[k]) for k in order],
                              color="tab:green")
            right.bar_label(bars, fmt="%.2f", padding=3)
            right.margins(x=0.15)
            right.set_yticks(range(len(order)), [
                repr(tok.decode(beam.tokens[k])) + (" </s>" if bool(beam.finished[0, k]) else "")
                for k in order])
            right.invert_yaxis()
        right.set(xlabel="score log P / lp (0 is best)", ylabel="hypothesis")
        right.set_title(f"beam search, K = {beam.K}, alpha = {beam.alpha}: hypotheses kept",
                        fontsize="medium")
        return fig


def decoding(model: ModelSource = None, text: str = "Friday, 5 March 2021", beam_size: int = 4,
             length_penalty: float = 0.6, top: int = 5) -> Explorer:
    """Decode one input a token at a time with a "next token" button: greedy's ``top``
    candidates with their probabilities, and beam search's hypotheses with their scores
    log P / lp (GNMT's length penalty, alpha = ``length_penalty``), without a cache."""
    controls = {"text": text_box(text),
                "beam_size": slider(check_int(beam_size, "beam_size", 1, 8), 1, 8, "beam size K")}
    check_float(length_penalty, "length_penalty", 0.0)
    transformer, tok = load_for_explorer(model)
    check_int(top, "top", 1, tok.vocab_size)
    step, restart = widgets.Button(description="next token"), widgets.Button(description="restart")
    state: Dict[str, Any] = {}

    def draw(text: str, beam_size: int) -> Tuple[plt.Figure, str]:
        if state.get("key") != (text, beam_size):                  # new input: start again
            state.clear()
            step.disabled = True
            src = encode_source(text, tok, transformer.config.max_len)      # (1, S)
            state.update(key=(text, beam_size), stepper=StepDecoder(
                transformer, src, beam_size, length_penalty, tok.bos_id, tok.eos_id, top))
        s = state["stepper"]
        step.disabled = s.done
        message = (f"step {s.steps}: greedy {tok.decode(s.greedy[0])!r}, beam's best "
                   f"{tok.decode(s.beam.best()[0])!r}" + ("; both finished" if s.done else ""))
        return s.figure(tok), message

    def next_token(_: Any) -> None:
        try:
            state["stepper"].step()
            explorer.update()
        except Exception as err:           # a button's callback that raised would do nothing
            explorer.say(f"{type(err).__name__}: {err}", error=True)

    def start_again(_: Any) -> None:
        state.clear()
        explorer.update()

    step.on_click(next_token)
    restart.on_click(start_again)
    explorer = Explorer("Decoding", controls, draw, buttons=[step, restart])
    return explorer
