"""``python -m transformer_lib.train``: runs :mod:`transformer_lib.cli.train`."""
import sys

from .cli.train import main

if __name__ == "__main__":
    sys.exit(main())
