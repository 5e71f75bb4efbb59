"""``python -m transformer_lib.export``: runs :mod:`transformer_lib.cli.export`."""
import sys

from .cli.export import main

if __name__ == "__main__":
    sys.exit(main())
