"""``python -m transformer_lib.export``: runs :mod:`transformer_lib.cli.export_command`."""

import sys

from .cli.export_command import main

if __name__ == "__main__":
    sys.exit(main())
