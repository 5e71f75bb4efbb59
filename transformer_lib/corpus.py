"""``python -m transformer_lib.corpus``: runs :mod:`transformer_lib.cli.corpus`."""
import sys

from .cli.corpus import main

if __name__ == "__main__":
    sys.exit(main())
