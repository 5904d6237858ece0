"""``trek trace RUN_DIR`` as one library call: roles in, the traced run out.

:func:`trace_with_roles` builds the role clients from :class:`~trek.roles.Role` records (all
in the run's response cache, roles on one server sharing its connection limit), resolves the
evaluated model against the run's ``run.json`` (an endpoint neither given nor recorded is refused
before any call), estimates the work, asks ``proceed`` and traces.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from trek import runs
from trek.aio import closing_run
from trek.limits import EndpointLimits
from trek.roles import Role, RoleError, make_judge
from trek.trace.common import RoleModel
from trek.trace.estimate import estimate_trace
from trek.trace.pipeline import UNKNOWN_POLICIES, TraceReport, atrace_run, evaluated_role_from_run

__all__ = ["trace_with_roles", "verify_with_roles"]


def trace_with_roles(
    run_dir: str | os.PathLike[str], *, diagnostic: Role, analysis: Role, evaluated: Role, audit: Role | None = None,
    client_settings: Mapping[str, Any] | None = None, exact_rule: str = "first",
    proceed: Callable[[Any, Any], bool] = lambda estimate, ledger: True, announce: Callable[[dict[str, Any]], None] =
    lambda roles: None, unknown: str = "incomplete", **trace: Any,
) -> TraceReport | None:
    """Trace ``run_dir`` with these roles (``None`` when ``proceed(estimate, ledger)`` said no).

    A judge role whose model is ``oracle`` is the exact judge (``exact_rule``); ``audit``: a model
    asked every step the exact judge answered. ``evaluated.model`` ``None``: the run's own model
    and endpoint. ``client_settings``: keywords of every client (``max_retries``,
    ``assume_output``...). ``announce(roles)`` is called once with the clients before any call;
    ``trace``: the keywords of :func:`trek.trace.pipeline.atrace_run` (and the page limits).
    """
    if unknown not in UNKNOWN_POLICIES:
        raise ValueError(f"--unknown-judgments must be one of {', '.join(UNKNOWN_POLICIES)}, not {unknown!r}")
    if not diagnostic.model or not analysis.model:
        raise RoleError("name the judges: --judge M, or --diagnostic-judge and --analysis-judge")
    rd = runs.RunDir(run_dir)
    if not rd.path.is_dir():
        raise runs.RecordError(rd.path, None, "run directory does not exist")
    settings = {"limits": EndpointLimits(), **(client_settings or {})}  # roles on one server share its limit

    def play(role: Role, name: str) -> RoleModel:
        client = make_judge(role, lambda r: rd.client(r, **settings), rule=exact_rule)
        return RoleModel(name, client, role.model or "", dict(role.params) if client.makes_calls else {})

    diag, ana = play(diagnostic, "diagnostic"), play(analysis, "analysis")
    audits: dict[str, RoleModel] = {}
    if audit is not None and audit.model:
        auditor = rd.client(audit, **settings)  # asked where the exact judge decides (refused without one)
        audits = {w.role: RoleModel(w.role, auditor, audit.model, dict(audit.params)) for w in (diag, ana)
                  if w.client.answers_without_model}
        if not audits:
            raise RoleError("--audit-judge records a model's answers beside the exact judge's: make a judge role exact")
    ev = evaluated_role_from_run(rd.path, settings=settings, role=evaluated)
    announce({"evaluated": ev.client, "diagnostic judge": diag.client, "analysis judge": ana.client,
              "audit judge": next(iter(audits.values())).client if audits else None})
    limits = {k: trace.pop(k) for k in ("gold_chars", "other_chars") if k in trace}
    est = estimate_trace(rd.path, diagnostic=diag, analysis=ana, evaluated=ev, check_stale=trace.get("check_stale", False),
                         assume_output=ev.client.assume_output, unknown=unknown, schedule=trace.get("schedule"),
                         **limits)
    if not proceed(est, rd.ledger(runs.TRACE)):
        return None
    return closing_run(atrace_run(rd.path, diagnostic=diag, analysis=ana, evaluated=ev, audit=audits, unknown=unknown,
                                  **limits, **trace), diag, ana, ev, *audits.values())


def verify_with_roles(
    run_dir: str | os.PathLike[str], *, diagnostic: Role, analysis: Role, evaluated: Role,
    client_settings: Mapping[str, Any] | None = None, exact_rule: str = "first",
    proceed: Callable[[Any, Any], bool] = lambda estimate, ledger: True,
    announce: Callable[[dict[str, Any]], None] = lambda roles: None, **verify: Any,
) -> Any:
    """``trek trace verify``: the roles built as :func:`trace_with_roles` builds them, the work
    estimated (:func:`trek.trace.verify_estimate.estimate_verify`) and ``proceed(estimate,
    ledger)`` asked (``None`` when it said no: ``--dry-run``), then
    :func:`trek.trace.verify.averify_run` (``verify``: its keywords)."""
    from trek.trace.verify import averify_run
    from trek.trace.verify_estimate import estimate_verify

    if not diagnostic.model or not analysis.model:
        raise RoleError("name the judges: --judge M, or --diagnostic-judge and --analysis-judge")
    rd = runs.RunDir(run_dir)
    if not rd.path.is_dir():
        raise runs.RecordError(rd.path, None, "run directory does not exist")
    settings = {"limits": EndpointLimits(), **(client_settings or {})}

    def play(role: Role, name: str) -> RoleModel:
        client = make_judge(role, lambda r: rd.client(r, **settings), rule=exact_rule)
        return RoleModel(name, client, role.model or "", dict(role.params) if client.makes_calls else {})

    diag, ana = play(diagnostic, "diagnostic"), play(analysis, "analysis")
    ev = evaluated_role_from_run(rd.path, settings=settings, role=evaluated)
    announce({"evaluated": ev.client, "diagnostic judge": diag.client, "analysis judge": ana.client})
    limits = {k: verify[k] for k in ("gold_chars", "other_chars") if k in verify}
    try:
        est = estimate_verify(rd.path, diagnostic=diag, analysis=ana, evaluated=ev,
                              live_repair=verify.get("live_repair", False), max_probes=verify.get("max_probes"),
                              assume_output=ev.client.assume_output,
                              **limits)
        go = proceed(est, rd.ledger(runs.VERIFY))
    except BaseException:
        closing_run(_nothing(), diag, ana, ev)
        raise
    if not go:
        closing_run(_nothing(), diag, ana, ev)
        return None
    return closing_run(averify_run(rd.path, diagnostic=diag, analysis=ana, evaluated=ev, **verify), diag, ana, ev)


async def _nothing() -> None:
    """A coroutine that does nothing (closes the role clients through :func:`closing_run`)."""
