"""Where ``trek.ctrl.reports`` finds the ``contexts.jsonl`` record: it lives in :mod:`trek.contexts`."""

from trek.contexts import Context, ContextDocument, read_contexts

__all__ = ["Context", "ContextDocument", "read_contexts"]
