"""Trek: where and why search-augmented LLMs fail on fast-changing facts.

The names a notebook needs, loaded on first use so that ``import trek`` (and every ``trek``
command, which imports this package first) pays nothing for them::

    import trek
    run = trek.load("data/runs/wild/agentic")   # trek.api.Run
    trek.runs_frame("data/runs")                # the table of `trek runs list`
    trek.compare(run_a, run_b)                  # paired McNemar of two runs

See :mod:`trek.api` (and the docs' "Python API" page).
"""

__version__ = "0.1.0"

__all__ = ["__version__", "load", "runs_frame", "compare", "Run", "Case", "Cases", "LABELS"]

#: The public face: each name is defined in :mod:`trek.api` and imported from there on first use.
_FACE = frozenset(__all__[1:])

# For type checkers and editors (which read any TYPE_CHECKING as true); at run time __getattr__ below
# does the import. Not typing.TYPE_CHECKING: importing typing is a cost `python -c pass` does not pay.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from trek.api import LABELS, Case, Cases, Run, compare, load, runs_frame


def __getattr__(name: str) -> object:
    if name in _FACE:
        from trek import api

        value = getattr(api, name)
        globals()[name] = value  # later look-ups skip this function
        return value
    raise AttributeError(f"module 'trek' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_FACE})
