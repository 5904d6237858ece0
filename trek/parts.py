"""Where Trek's parts are listed: the top of the stack imports them, so that the registries the
lower layers keep (templates, graders, importers, TrekTrace's tests, judge kinds) are complete.

Each part registers itself where it is defined (``templates.register``, ``@trace_test``,
``@judge_kind``, ...); no module below this one imports another by name. :func:`import_all` imports
every module that declares a prompt template (and with them the graders, importers and tests),
and is what :func:`trek.templates.known_templates` runs when the whole list is needed (an
override folder to check, an unknown name to report). The command line imports this module.
"""

from __future__ import annotations

from trek import templates

__all__ = ["import_all"]


@templates.completed_by
def import_all() -> None:
    """Import every part that declares templates or registers itself (``tests/test_templates.py``
    checks that each declaring module is imported from here, directly or through its package)."""
    from trek import answer_prompts, contexts, exact, graders  # noqa: F401  answer.*, ctrl.render.*, oracle, grader.*
    from trek.ctrl import discovery, fabrication  # noqa: F401  ctrl.discovery.*, ctrl.fabrication.*
    from trek.rag import answer, filter, rerank, structured  # noqa: F401  rag.*
    from trek.search import agent, openai_search, proxy  # noqa: F401  agent.*, search.openai, search.proxy
    from trek.trace import schedule, verify  # noqa: F401  trace.* (the schedule imports every TrekTrace test), trace.repair_queries
