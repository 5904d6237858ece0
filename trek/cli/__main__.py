"""``python -m trek.cli`` is the ``trek`` command."""

from trek.cli import main

main()
