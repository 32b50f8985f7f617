"""``python -m corral`` is the ``corral`` command."""

import sys

from corral.cli.main import main

sys.exit(main())  # as the console script does: `wait` returns its exit status (1, 124)
