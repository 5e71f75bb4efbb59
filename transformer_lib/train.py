"""``python -m transformer_lib.train``: runs :mod:`transformer_lib.cli.train_command`, with Ctrl-C
honoured from the moment this module starts (see :func:`.cli.stopping.run_command`)."""

import sys

from .cli.stopping import run_command


def _load():
    from .cli.train_command import main

    return main


if __name__ == "__main__":
    sys.exit(run_command(_load, "stopped before training wrote a checkpoint; nothing to resume"))
