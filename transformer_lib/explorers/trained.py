"""A trained model's attention on the learner's own input (notebooks 08 and 09)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Tuple, Union

import ipywidgets as widgets
import torch

from .. import plotting
from ..config import TransformerConfig
from ..data.tokenizers import Tokenizer
from ..model import Transformer
from ..search import greedy_decode, inference
from ..training.checkpoint import shipped_checkpoint
from .base import Explorer

KINDS = {
    "encoder self-attention": "encoder",
    "decoder self-attention": "decoder_self",
    "cross-attention": "decoder_cross",
}


Loaded = Tuple[Transformer, Tokenizer, Tokenizer]  # what load_model returns
# what an explorer's ``model`` may be: None (the shipped "dates"), a shipped checkpoint's
# name, a checkpoint path, or a loaded (model, src_tokenizer, tgt_tokenizer)
ModelSource = Union[None, str, "os.PathLike[str]", Loaded]


def load_for_explorer(model: ModelSource) -> Loaded:
    """(model, src_tokenizer, tgt_tokenizer) from such a tuple, a checkpoint path, the name
    of a shipped checkpoint (``"dates"``, ``"bible-en-fr"``) or None (``"dates"``)."""
    from ..training.checkpoint import SHIPPED, load_model

    if isinstance(model, tuple) and len(model) == 3:
        if not hasattr(model[0], "config") or not all(
            hasattr(t, "encode") and hasattr(t, "decode") for t in model[1:]
        ):
            raise TypeError(
                "model must be (model, src_tokenizer, tgt_tokenizer) as load_model "
                f"returns, got ({', '.join(type(m).__name__ for m in model)})"
            )
        return model
    if not (model is None or isinstance(model, (str, os.PathLike))):
        raise TypeError(
            f"model must be None, a shipped checkpoint's name {sorted(SHIPPED)}, a "
            "checkpoint path or (model, src_tokenizer, tgt_tokenizer), got "
            f"{model!r:.60} ({type(model).__name__})"
        )
    if model is None or model in SHIPPED:
        return load_model(shipped_checkpoint(model or "dates"))
    path = Path(model)
    if not path.is_file():
        raise FileNotFoundError(
            f"model must be a checkpoint file or (model, src_tokenizer, "
            f"tgt_tokenizer); no file at {path}"
        )
    return load_model(path)


def encode_source(text: str, tokenizer: Tokenizer, max_len: int) -> torch.Tensor:
    """One source text as (1, S) ids; ValueError with a learner-readable reason otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("type a sentence in the text box (it is empty)")
    unknown = sorted({ch for ch in text if tokenizer.unk_id in tokenizer.encode(ch)})
    if unknown:
        raise ValueError(
            f"the model's vocabulary has no {', '.join(map(repr, unknown))}: it "
            "only knows the characters of its training texts; it would read "
            "them as <unk>"
        )
    ids = tokenizer.encode(text)
    if len(ids) > max_len:
        raise ValueError(f"the text has {len(ids)} tokens; the model reads at most {max_len}")
    return torch.tensor([ids])  # (1, S)


def _label(tokenizer: Tokenizer, i: int) -> str:
    token = tokenizer.id_to_token(i)
    return "␣" if token == " " else token


def attention_controls(text: str, config: TransformerConfig) -> Dict[str, widgets.Widget]:
    """The attention explorer's text box and its kind, layer and head menus."""
    dropdown = dict(style={"description_width": "initial"})
    return {
        "text": widgets.Text(
            value=text, description="your input", continuous_update=False, **dropdown
        ),
        "kind": widgets.Dropdown(
            options=list(KINDS.items()), value="decoder_cross", description="kind", **dropdown
        ),
        "layer": widgets.Dropdown(options=list(range(config.N)), description="layer", **dropdown),
        "head": widgets.Dropdown(options=list(range(config.h)), description="head", **dropdown),
    }


def translated_with_weights(
    transformer: Transformer, src_tok: Tokenizer, tgt_tok: Tokenizer, text: str
) -> Tuple[str, Dict[str, Any], List[str], List[str], List[str]]:
    """Greedy-translate ``text`` and run the model once more on its own output for the
    attention weights: (translation, weights, source labels, decoder-input labels, query
    labels "input→predicted")."""
    c = transformer.config
    src = encode_source(text, src_tok, c.max_len)  # (1, S)
    out = greedy_decode(transformer, src, c.max_len, tgt_tok.bos_id, tgt_tok.eos_id)
    bos = torch.full((1, 1), tgt_tok.bos_id)
    y_in = torch.cat((bos, out[:, :-1]), dim=1)  # (1, T)
    with inference(transformer):
        _, weights = transformer(src, y_in, need_weights=True)
    ins = [_label(tgt_tok, i) for i in y_in[0].tolist()]
    rows = [f"{a}→{_label(tgt_tok, b)}" for a, b in zip(ins, out[0].tolist())]
    return (
        tgt_tok.decode(out[0].tolist()),
        weights,
        [_label(src_tok, i) for i in src[0].tolist()],
        ins,
        rows,
    )


def attention(model: ModelSource = None, text: str = "Friday, 5 March 2021") -> Explorer:
    """A text box for your own input, its greedy translation, and one attention heatmap of
    the trained model, picked by kind (encoder self, decoder self, cross), layer and head.

    ``model``: a checkpoint path, a shipped checkpoint's name (``"dates"``, the default, or
    ``"bible-en-fr"``) or the ``(model, src_tokenizer, tgt_tokenizer)`` of
    ``training.checkpoint.load_model``.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    transformer, src_tok, tgt_tok = load_for_explorer(model)
    controls = attention_controls(text, transformer.config)
    memo: Dict[str, Any] = {}

    def run(text):
        if text not in memo:
            result = translated_with_weights(transformer, src_tok, tgt_tok, text)
            memo.clear()
            memo[text] = result
        return memo[text]

    def draw(text, kind, layer, head):
        translation, weights, source, ins, rows = run(text)
        fig = attention_figure(weights, source, ins, rows, kind, layer, head)
        return fig, f"translation: {translation}"

    return Explorer("Attention", controls, draw)


def attention_figure(
    weights: Dict[str, Any],
    source: List[str],
    ins: List[str],
    rows: List[str],
    kind: str,
    layer: int,
    head: int,
):
    """One head's attention weights as a heatmap, queries down, keys across, labelled with
    the tokens of :func:`translated_with_weights` (§3.2.3's three uses of attention)."""
    queries, keys = {
        "encoder": (source, source),
        "decoder_self": (rows, ins),
        "decoder_cross": (rows, source),
    }[kind]
    w = weights[kind][layer][0, head : head + 1]  # (1, T_q, T_k)
    cell = min(0.3, 9 / max(len(queries), len(keys)))
    fig = plotting.attention_heads(w, queries, keys, cell=cell)
    ax = fig.axes[0]
    ax.set_title(
        f"{next(k for k, v in KINDS.items() if v == kind)}, layer {layer}, head {head}",
        fontsize="medium",
    )
    ax.set_xlabel("key: " + ("decoder input" if kind == "decoder_self" else "source"))
    ax.set_ylabel("query: " + ("source" if kind == "encoder" else "input→predicted"))
    return fig
