"""Default paths from the environment: the one place Trek reads a ``$TREK_*`` path variable.

Every function that picks a default file or folder (the LLM cache, the search cache, the page
store, the data folders, ...) calls :func:`env_path` with the variable's name and its fallback,
so each variable means the same everywhere: set and not empty, it wins (``~`` expanded); unset or
empty, the fallback is used. :data:`PATH_VARIABLES` is the table of the variables (docs/environment.md
lists the same).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["BUNDLED_MINI_DIR", "PATH_VARIABLES", "env_path"]

#: ``data/mini`` at the repository root: the bundled TrekBench-Mini (located relative to this file).
BUNDLED_MINI_DIR = Path(__file__).resolve().parents[1] / "data" / "mini"

#: Every ``$TREK_*`` variable that names a file or folder, and what it overrides.
PATH_VARIABLES: dict[str, str] = {
    "TREK_CACHE": "the LLM response cache (SQLite); default llm-cache.sqlite in the run directory",
    "TREK_SEARCH_CACHE": "the search-result cache (SQLite); default search-cache.sqlite in the run directory",
    "TREK_PAGES": "the page store (SQLite); default pages.sqlite in the run directory",
    "TREK_DATA_DIR": "the folder of the source datasets (FreshQA, InfoDeepSeek, SealQA); default ./datasets",
    "TREK_MINI_DIR": "the TrekBench-Mini folder; default the bundled data/mini",
    "TREK_PRICES": "a price table (JSON) merged over the bundled trek/prices.json; default none",
    "TREK_PROMPTS": "a folder of prompt template overrides (<name>.txt); default none",
    "TREK_LOCAL_LOG": "a file that keeps the embedded llama.cpp server's log; default none (discarded)",
}


def env_path(name: str, default: str | os.PathLike[str] | None = None) -> Path | None:
    """``$name`` as a path when it is set and not empty (``~`` expanded), else ``default``
    (``None`` stays ``None``). ``name`` must be one of :data:`PATH_VARIABLES`."""
    if name not in PATH_VARIABLES:
        raise KeyError(f"{name} is not a Trek path variable; known: {', '.join(PATH_VARIABLES)}")
    value = os.environ.get(name)
    if value:
        return Path(value).expanduser()
    return Path(default) if default is not None else None
