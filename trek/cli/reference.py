"""The ``trek`` command as a plain click object, for tools that read click commands.

``typer`` builds its click group on demand; the documentation's command reference (mkdocs-click,
``docs/cli.md``) and the docs test that checks the docs' command lines import :data:`cli` from
here. Importing this module builds the group; the commands' own modules load as each is asked for.
"""

from __future__ import annotations

import typer

from trek.cli import app

__all__ = ["cli"]

#: ``trek`` as a click group (typer's ``get_command(app)``).
cli = typer.main.get_command(app)
