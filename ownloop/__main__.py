"""``python -m ownloop``: the same as the ``ownloop`` command."""

from ownloop.cli import main

main()
