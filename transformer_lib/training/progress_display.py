"""The display of how far training is: a terminal bar, or one status line in a notebook.

The setting ``TrainSettings.progress`` (the only meaning of ``progress`` in the package)
picks one:

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

PROGRESS_VALUES = (True, False, "notebook")  # what TrainSettings.progress may be


def check_progress(progress: object) -> None:
    """ValueError unless ``progress`` is one of :data:`PROGRESS_VALUES` (``1`` is not ``True``)."""
    if not any(progress is s or (isinstance(s, str) and progress == s) for s in PROGRESS_VALUES):
        raise ValueError(f"progress must be True, False or 'notebook', got {progress!r}")


class StatusLine:
    """A one-line status for notebooks, with the parts of tqdm's interface that
    :meth:`Trainer.fit` uses (``update``, ``set_postfix``, ``write``, ``close``)."""

    def __init__(
        self,
        total: int,
        initial: int = 0,
        desc: str = "train",
        min_interval: float = 0.5,
        handle: Any = None,
    ) -> None:
        self.total, self.n, self.desc, self.min_interval = total, initial, desc, min_interval
        self.postfix: Dict[str, Any] = {}
        self.start, self.start_n, self._shown = time.perf_counter(), initial, -math.inf
        if handle is None:
            from IPython.display import display  # only where a notebook asks for it

            handle = display({"text/plain": self.status()}, raw=True, display_id=True)
        self.handle = handle

    def status(self) -> str:
        seconds = time.perf_counter() - self.start
        rate = (self.n - self.start_n) / seconds if seconds > 0 else 0.0
        extra = "".join(f", {k} {v}" for k, v in self.postfix.items())
        return (
            f"{self.desc}: step {self.n}/{self.total}, {seconds:.0f} s, {rate:.1f} steps/s{extra}"
        )

    def _show(self, force: bool = False) -> None:
        now = time.perf_counter()
        if force or now - self._shown >= self.min_interval:
            self.handle.update({"text/plain": self.status()}, raw=True)
            self._shown = now

    def update(self, n: int = 1) -> None:
        self.n += n
        self._show()

    def set_postfix(self, refresh: bool = False, **values: Any) -> None:
        self.postfix = values
        if refresh:
            self._show(force=True)

    def write(self, message: str) -> None:
        print(message, flush=True)

    def close(self) -> None:
        self._show(force=True)


def make_display(
    progress: Union[bool, str], total: int, initial: int, show: bool, handle: Any = None
) -> Union[tqdm, StatusLine]:
    """The display of one ``fit`` for the setting ``progress``; ``show`` is False on all
    but the main process."""
    check_progress(progress)
    if progress == "notebook" and show:
        return StatusLine(total, initial, handle=handle)
    return tqdm(
        total=total,
        initial=initial,
        disable=not (progress and show),
        desc="train",
        unit="step",
        dynamic_ncols=True,
        mininterval=0.1 if sys.stderr.isatty() else 2.0,
    )
