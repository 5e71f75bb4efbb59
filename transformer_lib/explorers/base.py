"""The frame every explorer shares: controls, a message line and a figure redrawn from them."""

from __future__ import annotations

import html
import io
import warnings
from typing import Callable, Dict, Sequence, Tuple

import ipywidgets as widgets
import matplotlib.pyplot as plt


class Explorer:
    """Controls above a message line and a figure; ``update()`` redraws from the controls.

    ``draw(**values)`` returns ``(figure, message)`` and may raise ``ValueError`` or
    ``TypeError``: then the error's text becomes the message and the figure is hidden. Any
    other error is shown the same way, with its type: ``update`` runs in widget callbacks,
    where a raised error would only leave the figure silently stale.
    """

    def __init__(
        self,
        name: str,
        controls: Dict[str, widgets.Widget],
        draw: Callable[..., Tuple[plt.Figure, str]],
        extra: Sequence[widgets.Widget] = (),
    ) -> None:
        self.name, self.controls, self._draw = name, controls, draw
        self.message = widgets.HTML()
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        rows = [widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap"))]
        self.widget = widgets.VBox(rows + list(extra) + [self.message, self.image])
        self._busy = False
        self.buttons: Dict[str, widgets.Button] = {}  # the explorer's buttons, by label
        for control in controls.values():
            control.observe(lambda _: self.update(), names="value")
        self.update()

    def values(self) -> dict:
        return {name: c.value for name, c in self.controls.items() if hasattr(c, "value")}

    def update(self) -> None:
        if self._busy:  # a control changed by draw() itself: already drawing
            return
        self._busy = True
        try:
            fig, text = self._draw(**self.values())
            self.image.value = figure_png(fig)
            self.image.layout.display = None
            self.say(text)
        except Exception as err:  # in a callback, a raised error would be lost
            known = isinstance(err, (ValueError, TypeError))
            self.say(str(err) if known else f"{type(err).__name__}: {err}", error=True)
            self.image.layout.display = "none"
        finally:
            self._busy = False

    def say(self, text: str, error: bool = False) -> None:
        style = "color:#b00020" if error else ""
        self.message.value = f'<span style="{style}">{html.escape(text)}</span>'

    def _repr_mimebundle_(self, **kwargs):
        data = self.widget._repr_mimebundle_(**kwargs)  # the widget view and a text repr
        data["text/plain"] = (
            f"{self.name} explorer (interactive: run this cell in "
            "JupyterLab to use it)"
        )  # the same text every run
        return data


def figure_png(fig: plt.Figure) -> bytes:
    """The figure as PNG bytes at 100 dpi; the figure is closed."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():  # a character DejaVu Sans lacks: drawn as a box
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        fig.savefig(buffer, format="png", dpi=100, facecolor="white")
    plt.close(fig)
    return buffer.getvalue()


def slider(value: int, low: int, high: int, description: str, step: int = 1) -> widgets.IntSlider:
    return widgets.IntSlider(
        value=value,
        min=low,
        max=high,
        step=step,
        description=description,
        continuous_update=False,
        style={"description_width": "initial"},
    )
