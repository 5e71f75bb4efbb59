"""Interactive explorers for the notebooks: sliders, text boxes and buttons (ipywidgets) that
redraw a figure of :mod:`transformer_lib.plotting`.

Each is one call in a notebook cell, after the static figure that teaches the same point::

    from transformer_lib import explorers
    explorers.positional_encoding()     # d_model, position, dimension: table, curves, similarity
    explorers.masks()                   # lengths and padding: padding, causal, combined masks
    explorers.attention()               # your own date: every layer, head and kind of attention
    explorers.attention("bible-en-fr", text="...")   # your own English sentence
    explorers.decoding()                # "next token": greedy's and beam's candidates per step

Every explorer is an :class:`Explorer`: ``controls`` (the widgets, by name), ``image`` (the
figure as PNG), ``message`` (a line of text) and ``update()``, which redraws from the
controls' values; it runs whenever a control changes. Bad input (a character the model's
vocabulary lacks, an empty text box) is reported in ``message``, never as a traceback.
Figures are drawn off screen and closed, so an explorer never adds a figure to a cell.
Needs ``ipywidgets`` (in the ``dev`` extra). One module an explorer family: :mod:`.base`
(the :class:`Explorer` frame), :mod:`.encoding` (positional encoding, masks: no model),
:mod:`.trained` (the trained model's attention), :mod:`.stepping` (decoding step by step).
"""

from .. import plotting
from .base import Explorer, figure_png
from .encoding import masks, positional_encoding
from .stepping import StepDecoder, decoding, plot_decoding_step
from .trained import KINDS, attention, encode_source, load_for_explorer

__all__ = [
    "Explorer",
    "figure_png",
    "positional_encoding",
    "masks",
    "attention",
    "decoding",
    "encode_source",
    "StepDecoder",
    "plot_decoding_step",
    "load_for_explorer",
    "KINDS",
    "plotting",
]
