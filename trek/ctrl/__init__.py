"""TrekBench-Ctrl: pools, republication, fabrication and conditions (paper section 4, appendix D).

The ``contexts.jsonl`` record, its reader and the renderer live in :mod:`trek.contexts`.

Entry points::

    from trek.ctrl import from_mini, from_longseal, read_pools, build, read_contexts
    result = build(from_mini(), "build/ctrl-mini")         # pools.jsonl, contexts.jsonl, build.json
    contexts = read_contexts(result.contexts_path)          # list[Context], sha256 checked
"""

from trek.contexts import Context, ContextDocument, read_contexts
from trek.ctrl.build import BuildResult, build
from trek.ctrl.conditions import ABLATIONS, ALL_CONDITIONS, MAIN_CONDITIONS, Budgets
from trek.ctrl.pools import Pool, from_longseal, from_mini, read_pools, write_pools

__all__ = [
    "ABLATIONS",
    "ALL_CONDITIONS",
    "MAIN_CONDITIONS",
    "Budgets",
    "BuildResult",
    "Context",
    "ContextDocument",
    "Pool",
    "build",
    "from_longseal",
    "from_mini",
    "read_contexts",
    "read_pools",
    "write_pools",
]
