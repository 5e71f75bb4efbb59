"""``python -m transformer_lib.corpus``: runs :mod:`transformer_lib.cli.corpus_command`."""

import sys

from .cli.corpus_command import main

if __name__ == "__main__":
    sys.exit(main())
