"""How the training loop shows its progress: a terminal bar, or one line in a notebook.

``TrainSettings.progress`` picks one:

* ``True``: a ``tqdm`` bar on stderr (the command line);
* ``"notebook"``: one status line shown through IPython's ``display`` and updated in place
  (live in JupyterLab), while messages such as the validation results are printed as
  ordinary lines. A notebook saved after the run keeps the final status line and one line
  per message, not a stream of bar fragments;
* ``False``: nothing but the messages.
"""
from __future__ import annotations

import math
import sys
import time
from typing import Any, Dict, Union

from tqdm import tqdm

STYLES = (True, False, "notebook")


def check_style(progress) -> None:
    if not any(progress is s or (isinstance(s, str) and progress == s) for s in STYLES):
        raise ValueError(f"progress must be True, False or 'notebook', got {progress!r}")


class LineProgress:
    """A one-line status for notebooks, with the parts of tqdm's interface that
    :meth:`Trainer.fit` uses (``update``, ``set_postfix``, ``write``, ``close``)."""

    def __init__(self, total: int, initial: int = 0, desc: str = "train",
                 min_interval: float = 0.5, handle=None) -> None:
        self.total, self.n, self.desc, self.min_interval = total, initial, desc, min_interval
        self.postfix: Dict[str, Any] = {}
        self.start, self.start_n, self._shown = time.perf_counter(), initial, -math.inf
        if handle is None:
            from IPython.display import display      # only where a notebook asks for it
            handle = display({"text/plain": self.status()}, raw=True, display_id=True)
        self.handle = handle

    def status(self) -> str:
        seconds = time.perf_counter() - self.start
        rate = (self.n - self.start_n) / seconds if seconds > 0 else 0.0
        extra = "".join(f", {k} {v}" for k, v in self.postfix.items())
        return (f"{self.desc}: step {self.n}/{self.total}, {seconds:.0f} s, "
                f"{rate:.1f} steps/s{extra}")

    def _show(self, force: bool = False) -> None:
        now = time.perf_counter()
        if force or now - self._shown >= self.min_interval:
            self.handle.update({"text/plain": self.status()}, raw=True)
            self._shown = now

    def update(self, n: int = 1) -> None:
        self.n += n
        self._show()

    def set_postfix(self, refresh: bool = False, **values) -> None:
        self.postfix = values
        if refresh:
            self._show(force=True)

    def write(self, message: str) -> None:
        print(message, flush=True)

    def close(self) -> None:
        self._show(force=True)


def make_progress(progress: Union[bool, str], total: int, initial: int, show: bool,
                  handle=None) -> Union[tqdm, LineProgress]:
    """The progress display of one ``fit``; ``show`` is False on all but the main process."""
    check_style(progress)
    if progress == "notebook" and show:
        return LineProgress(total, initial, handle=handle)
    return tqdm(total=total, initial=initial, disable=not (progress and show),
                desc="train", unit="step", dynamic_ncols=True,
                mininterval=0.1 if sys.stderr.isatty() else 2.0)

