"""``python -m transformer_lib.translate``: runs :mod:`transformer_lib.cli.translate`."""
import sys

from .cli.translate import main

if __name__ == "__main__":
    sys.exit(main())
