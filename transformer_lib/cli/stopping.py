"""Ctrl-C (SIGINT) and SIGTERM, what job schedulers send, for the training command line.

While the trainer runs, the first signal asks it to stop after the current step; it then
writes a checkpoint of that step and the command line says how to resume. A second signal
stops at once (the checkpoint write is atomic, so the last complete one stays). Outside
training both signals raise :class:`Interrupted`, which the command line turns into one line.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import warnings
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Callable, Iterator, List, Optional, Type, Union

if TYPE_CHECKING:  # the entry points load this module before PyTorch
    from ..training.trainer import Trainer

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A SIGINT or SIGTERM that stops the command line now; ``signum`` says which."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code(signum: int) -> int:
    """The shell's convention for a process ended by a signal: 128 + its number."""
    return 128 + int(signum)


def _raise(signum: int, frame: Optional[FrameType]) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`Interrupted` inside the block (SIGTERM would
    otherwise end the process without a word)."""
    old = {s: signal.signal(s, _raise) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _exit_now(signum: int, frame: Optional[FrameType]) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(exit_code(signum))


def one_line_warning(
    message: Union[Warning, str],
    category: Type[Warning],
    filename: str,
    lineno: int,
    line: Optional[str] = None,
) -> str:
    """A warning as a command line shows it: one line, no source location."""
    return f"warning: {message}\n"


def run_command(load_main: Callable[[], Callable[[], int]], interrupted: str) -> int:
    """Run a command line with SIGINT and SIGTERM honoured from its first line.

    ``load_main()`` imports the command and returns its ``main``. A signal that lands
    before ``main`` handles signals itself (while the modules load) prints
    ``SIGINT: <interrupted>`` and gives 128 + its number; one that lands once ``main`` has
    returned (Python's exit handlers) ends the process at once with that code, quietly.
    """
    for s in SIGNALS:
        signal.signal(s, _raise)
    warnings.formatwarning = one_line_warning
    try:
        code = load_main()()
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", signal.SIGINT)
        print(f"{signal_name(signum)}: {interrupted}", file=sys.stderr)
        code = exit_code(signum)
    for s in SIGNALS:
        signal.signal(s, _exit_now)
    return code


class GracefulStop:
    """Inside ``with GracefulStop(trainer):`` the first SIGINT/SIGTERM calls
    ``trainer.request_stop`` and a second raises :class:`Interrupted`.

    ``signum`` is the first signal received, or None.
    """

    def __init__(self, trainer: Trainer, announce: bool = True) -> None:
        self.trainer, self.announce = trainer, announce
        self.signum: Optional[int] = None
        self._old: dict = {}

    def __enter__(self) -> "GracefulStop":
        self._old = {s: signal.signal(s, self._handle) for s in SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._old.items():
            signal.signal(s, handler)

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        if self.signum is not None:
            raise Interrupted(signum)
        self.signum = signum
        self.trainer.request_stop(signum)
        if self.announce:
            sys.stderr.write(
                f"\n{signal.Signals(signum).name}: stopping after step "
                f"{self.trainer.step + 1} to write a checkpoint (send it again "
                "to stop at once)\n"
            )
            sys.stderr.flush()


def resume_command(argv: List[str]) -> str:
    """The command that continues this run: the same arguments, ``--resume`` added and
    ``--force`` left out (it would not overwrite anything, but reads as if it did)."""
    args = [a for a in argv if a != "--force"]
    if "--resume" not in args:
        args.append("--resume")
    world = os.environ.get("WORLD_SIZE")
    if os.environ.get("LOCAL_RANK") is not None and world:
        launcher = f"torchrun --nproc_per_node={world} -m transformer_lib.train"
    else:
        launcher = "python -m transformer_lib.train"
    return f"{launcher} {shlex.join(args)}"


# what the command line says ---------------------------------------------------------------
def stopped(argv: List[str], ckpt_path: Path, trainer: Trainer, signum: int) -> int:
    """After a graceful stop: where the checkpoint is and how to go on."""
    name, steps = signal_name(signum), trainer.settings.steps
    if trainer.stopped_early:
        print(
            f"{name}: stopped after step {trainer.step} of {steps}; checkpoint {ckpt_path} "
            f"(step {trainer.step}). Resume with: {resume_command(argv)}",
            file=sys.stderr,
        )
    else:
        print(
            f"{name}: training had finished; checkpoint {ckpt_path} (step {trainer.step}) "
            "is complete (the test set, if any, was not scored)",
            file=sys.stderr,
        )
    return exit_code(signum)


def stopped_at_once(
    argv: List[str], ckpt_path: Path, trainer: Optional[Trainer], signum: int
) -> int:
    name = signal_name(signum)
    saved = trainer.saved_step if trainer is not None else None
    main = trainer is None or trainer.dist.is_main
    if saved is not None and main:
        print(
            f"{name}: stopped at once; the last complete checkpoint is {ckpt_path} "
            f"(step {saved}). Resume with: {resume_command(argv)}",
            file=sys.stderr,
        )
    elif main:
        print(
            f"{name}: stopped before training wrote a checkpoint; nothing to resume",
            file=sys.stderr,
        )
    return exit_code(signum)


def failed_save(argv: List[str], ckpt_path: Path, trainer: Trainer, error: OSError) -> int:
    """A checkpoint that could not be written (disk full, ...): the previous one is intact."""
    saved = trainer.saved_step
    last = (
        f"the last complete checkpoint is {ckpt_path} (step {saved}); fix that, then "
        f"resume with: {resume_command(argv)}"
        if saved is not None
        else "no checkpoint was written"
    )
    print(f"error: {type(error).__name__}: {error}; {last}", file=sys.stderr)
    return 1


def diverged(ckpt_path: Path, trainer: Optional[Trainer], error: FloatingPointError) -> int:
    """Training that diverged (the loss is NaN or infinite): one line, no traceback."""
    saved = trainer.saved_step if trainer is not None else None
    last = (
        f"the last complete checkpoint is {ckpt_path} (step {saved})"
        if saved is not None
        else "no checkpoint was written"
    )
    what = str(error).split(":")[0]  # "loss is nan at step N"
    print(
        f"error: training diverged: {what}; lower --lr-factor or raise --warmup; {last}",
        file=sys.stderr,
    )
    return 1


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name
