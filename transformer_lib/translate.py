"""``python -m transformer_lib.translate``: runs :mod:`transformer_lib.cli.translate_command`, with
Ctrl-C answered in one line (see :func:`.cli.stopping.run_command`)."""

import sys

from .cli.stopping import run_command


def _load():
    from .cli.translate_command import main

    return main


if __name__ == "__main__":
    sys.exit(run_command(_load, "stopped; translations not yet written are lost"))
