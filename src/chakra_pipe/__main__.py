"""``python -m chakra_pipe``: the same command as ``chakra-pipe``, for environments without the script."""

import sys

from .cli import main

sys.exit(main())
