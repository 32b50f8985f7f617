"""``python -m corral`` is the ``corral`` command."""

from corral.cli.main import main

main()
