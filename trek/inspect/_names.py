"""The names Trek's components register under, ``trek/<name>`` wherever trek is imported from.

inspect prefixes a component's name with its package when it finds the package installed
(site-packages, or an editable install). Run from the repository root, ``importlib.metadata``
may find the build's ``trek.egg-info`` first (no editable marker) and inspect then leaves the
prefix off; :func:`name` gives the prefix itself in that case, so lookups of ``trek/...`` work
from any folder.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = "trek"


def _prefixed_by_inspect() -> bool:
    from inspect_ai._util.package import package_is_installed_editable, package_path_is_in_site_packages

    return package_path_is_in_site_packages(str(Path(__file__).resolve())) or package_is_installed_editable(PACKAGE)


def name(short: str) -> str:
    """The name to give ``@task``/``@scorer``/``@tool`` so the component is ``trek/<short>``."""
    return short if _prefixed_by_inspect() else f"{PACKAGE}/{short}"
