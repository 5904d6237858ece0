"""``trek trace``: attribute a run's failures, build the review workbook, measure agreement, view.

    trek trace RUN_DIR [--diagnostic-judge M] [--analysis-judge M] [--model M --base-url U]
    trek trace review RUN_DIR            -> RUN_DIR/review.xlsx
    trek trace agreement review.xlsx     -> Cohen's kappa, confusion table, disagreements
    trek trace view RUN_DIR              -> RUN_DIR/trace.html
    trek trace export RUN_DIR --format langfuse|otlp --out FILE   -> the labels as trace scores

``trek trace RUN_DIR`` is short for ``trek trace run RUN_DIR``.
"""

from __future__ import annotations

from pathlib import Path

import typer
from typer.core import TyperGroup

from trek.cli import options
from trek.llm.cache import LLMCache, default_cache_path
from trek.llm.client import FatalLLMError, LLMClient
from trek.pages import GOLD_CHARS, NON_GOLD_CHARS
from trek.types import RecordError

__all__ = ["app"]


class _RunByDefault(TyperGroup):
    """A group whose first argument, when it is not a sub-command, is the run of ``run``."""

    def parse_args(self, ctx, args):  # type: ignore[no-untyped-def]
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=_RunByDefault,
    help="TrekTrace: where did a search-augmented system fail? (`trek trace RUN_DIR` traces a run.)",
    no_args_is_help=True,
)


@app.command("run")
@options.grouped
def run_command(
    run_dir: Path = typer.Argument(..., help="A graded run directory (questions, answers, grades)."),
    judge: str = typer.Option(None, "--judge", help="Model of both judges (unless set one by one); oracle: the "
                              "exact judge, decided from the annotations of TrekBench-Mini (no model call)."),
    diagnostic_judge: str = typer.Option(None, "--diagnostic-judge", help="Model that extracts and matches evidence."),
    analysis_judge: str = typer.Option(None, "--analysis-judge", help="Model that assesses queries and grades probes."),
    judge_base_url: str = options.JUDGE_BASE_URL,
    diagnostic_base_url: str = typer.Option(None, "--diagnostic-base-url", help="Endpoint of the diagnostic judge."),
    analysis_base_url: str = typer.Option(None, "--analysis-base-url", help="Endpoint of the analysis judge."),
    model: str = typer.Option(None, "--model", help="Evaluated model for the probes (default: the run's model)."),
    base_url: str = typer.Option(None, "--base-url", help="Endpoint of the evaluated model (default: the run's)."),
    check_stale: bool = typer.Option(False, "--check-stale", help="Also ask whether the gold pages still support "
                                     "the reference (listed first for review)."),
    fetch: bool = typer.Option(False, "--fetch", help="Fetch pages missing from the run's page store."),
    budget: float = options.BUDGET,
    prices: Path = options.PRICES,
    unknown: str = typer.Option("incomplete", "--unknown-judgments",
                                help="How a judgment that stays unreadable counts: incomplete (the test did not "
                                "run; the case gets no label from it) or paper (an unknown value placed by the "
                                "C.4 rules as printed, Randomness as the residual)."),
    gold_chars: int = typer.Option(GOLD_CHARS, "--gold-chars", min=1, help="Characters shown of each gold page."),
    other_chars: int = typer.Option(NON_GOLD_CHARS, "--other-chars", min=1,
                                    help="Characters shown of every other page."),
    max_connections: int = options.MAX_CONNECTIONS,
    max_retries: int = options.MAX_RETRIES,
    prompts: Path = options.PROMPTS,
    judge_param: list[str] = options.JUDGE_PARAM,
    spending: options.Spending = options.GROUP,
    progress: bool = options.PROGRESS,
    exact_rule: str = options.EXACT_RULE,
    query_depth: int = typer.Option(None, "--query-depth", min=1,
                                    help="Exact query test: rank a gold page within this depth (default: 10 or twice the "
                                    "system's own result depth from run.json, the deeper)."),
    audit_judge: str = options.AUDIT_JUDGE,
    audit_limit: int = typer.Option(None, "--audit-limit", min=1,
                                    help="--audit-judge: audit only the first N traced cases (question order)."),
) -> None:
    """Trace every failed answer of a run and write RUN_DIR/trace.jsonl.

    A judge given as oracle (--judge, --diagnostic-judge or --analysis-judge) is the exact judge: it
    answers from the annotations of TrekBench-Mini and makes no call; a run it cannot answer for
    (questions or pages not annotated, no local search) is refused. --audit-judge M asks model M
    every step the exact judge answered, recorded beside it (audit_steps); compare with
    `trek judge audit RUN`.

    Resumable and cached: finished cases are kept, pending and failed ones retried, and replies
    come from the run's LLM cache. A case whose needed test could not run (no gold page, a judge
    reply that stayed unreadable) is incomplete: no label from that test. --budget is a ceiling
    over every invocation on the run, all roles together (RUN_DIR/.trace.jsonl.spend). Exit code 0 when every
    case is fully traced, 2 for bad input, 3 while cases are incomplete, pending or failed, or while
    answered questions have no grade (run trek grade first).
    """
    from trek import templates
    from trek.aio import closing_run
    from trek.exact import ORACLE, ExactJudge
    from trek.graders.common import explain_unsupported_parameter, parse_judge_params
    from trek.limits import EndpointLimits
    from trek.llm.ledger import ledger_path
    from trek.llm.usage import PriceTable
    from trek.runs import TRACE
    from trek.trace.common import RoleModel
    from trek.trace.estimate import estimate_trace
    from trek.trace.pipeline import UNKNOWN_POLICIES, atrace_run, evaluated_role_from_run

    if unknown not in UNKNOWN_POLICIES:
        options.fail(f"--unknown-judgments must be one of {', '.join(UNKNOWN_POLICIES)}, not {unknown!r}")
    diag_model = diagnostic_judge or judge
    ana_model = analysis_judge or judge
    if not diag_model or not ana_model:
        options.fail("name the judges: --judge M, or --diagnostic-judge and --analysis-judge")
    with (
        options.exit_on(FatalLLMError, RecordError, ValueError, FileNotFoundError, hint=explain_unsupported_parameter),
        templates.prompts_folder(prompts),
    ):
        if not run_dir.is_dir():
            raise RecordError(run_dir, None, "run directory does not exist")
        params = parse_judge_params(judge_param)
        cache = LLMCache(default_cache_path(run_dir))
        table = PriceTable.load(prices)
        limits = EndpointLimits()  # roles on one server share its connection limit

        def client(m: str, url: str | None) -> LLMClient:
            return LLMClient(m, base_url=url, cache=cache, max_connections=max_connections,
                             max_retries=max_retries, progress=False, limits=limits,
                             assume_output=spending.assume_output, prices=table)

        exact = ExactJudge(rule=exact_rule) if ORACLE in (diag_model, ana_model) else None

        def judge_role(role: str, m: str, url: str | None) -> RoleModel:
            if m == ORACLE:
                return RoleModel(role, exact, ORACLE, {})  # type: ignore[arg-type]
            return RoleModel(role, client(m, url), m, dict(params))

        diag = judge_role("diagnostic", diag_model, diagnostic_base_url or judge_base_url)
        ana = judge_role("analysis", ana_model, analysis_base_url or judge_base_url)
        audit: dict[str, RoleModel] = {}
        if audit_judge:
            if exact is None:
                options.fail("--audit-judge records a model's answers beside the exact judge's: make a judge oracle")
            auditor = client(audit_judge, judge_base_url)
            audit = {w.role: RoleModel(w.role, auditor, audit_judge, dict(params)) for w in (diag, ana)
                     if w.model == ORACLE}
        if model or base_url:
            ev = evaluated_role_from_run(run_dir, model=model)
            if base_url:
                ev.client = client(ev.model, base_url)
        else:
            ev = evaluated_role_from_run(run_dir)
        ev.client.assume_output, ev.client.prices = spending.assume_output, table
        options.say_roles({"evaluated": ev.client, "diagnostic judge": diag.client, "analysis judge": ana.client,
                           "audit judge": next(iter(audit.values())).client if audit else None})
        limits = {"gold_chars": gold_chars, "other_chars": other_chars, "unknown": unknown, "query_depth": query_depth}
        est = estimate_trace(run_dir, diagnostic=diag, analysis=ana, evaluated=ev, check_stale=check_stale,
                             assume_output=spending.assume_output, **limits)
        if not spending.proceed(est, budget, ledger=ledger_path(run_dir / TRACE)):
            return
        report = closing_run(atrace_run(run_dir, diagnostic=diag, analysis=ana, evaluated=ev, fetch=fetch,
                                        check_stale=check_stale, budget_usd=budget, progress=progress, audit=audit,
                                        audit_cases=audit_limit, **limits), diag, ana, ev, *audit.values())
    typer.echo(report.describe())
    ungraded = report.selection.skipped.get("ungraded", 0)
    if ungraded:
        typer.echo(f"not finished: {ungraded} answered question(s) have no grade, so their failures are not known "
                   f"yet: grade the run first (trek grade {run_dir} --judge MODEL), then trace it again", err=True)
        raise typer.Exit(3)
    if report.pending or report.incomplete or report.failed:
        reasons = sorted({r.error for r in report.records if r.status in ("pending", "failed") and r.error})
        if reasons:
            typer.echo(f"why not finished, e.g.: {reasons[0]}", err=True)
        typer.echo(f"not finished: {report.incomplete} incomplete, {report.pending} pending and {report.failed} "
                   "failed case(s); pending and failed ones are retried by the same command, incomplete ones once "
                   "their pages are there (trek trace --fetch, or pages added to the run's page store)", err=True)
        raise typer.Exit(3)


@app.command("review")
def review_command(
    run_dir: Path = typer.Argument(..., help="A traced run directory."),
    out: Path = typer.Option(None, "--out", help="Workbook path (default: RUN_DIR/review.xlsx)."),
) -> None:
    """Write the review workbook: checklist, retrieval audit and taxonomy sheets."""
    from trek.trace.review import write_review

    with options.exit_on(RecordError, FileNotFoundError, ValueError):
        path = write_review(run_dir, out)
    typer.echo(f"wrote {path}")


@app.command("agreement")
def agreement_command(
    workbook: Path = typer.Argument(..., help="A review workbook filled in by a reviewer."),
) -> None:
    """Cohen's kappa between the reviewer and TrekTrace, with the confusion table and disagreements."""
    from trek.trace.agreement import agreement

    with options.exit_on(FileNotFoundError, ValueError):
        result = agreement(workbook)
    typer.echo(result.describe())


@app.command("view")
def view_command(
    run_dirs: list[Path] = typer.Argument(..., help="One or more traced run directories."),
    out: Path = typer.Option(None, "--out", help="HTML path (default: RUN_DIR/trace.html of the first run)."),
) -> None:
    """Write one self-contained HTML page of the traced cases (filters by label and dataset)."""
    from trek.jsonio import unique_paths
    from trek.trace.view import write_view

    with options.exit_on(RecordError, FileNotFoundError, ValueError):
        run_dirs, again = unique_paths(run_dirs)
        for d in again:
            typer.echo(f"note: {d} is given more than once; its cases are shown once", err=True)
        path = write_view(run_dirs, out)
    typer.echo(f"wrote {path}")


@app.command("export")
def export_command(
    run_dir: Path = typer.Argument(..., help="A traced run imported from traces (trek import otlp|langfuse)."),
    fmt: str = typer.Option(..., "--format", metavar="FORMAT", help="langfuse (score rows, JSONL) or otlp "
                            "(gen_ai.evaluation.result events in the imported traces, OTLP/JSON)."),
    out: Path = typer.Option(..., "--out", help="The file to write (outside the run directory)."),
) -> None:
    """Write TrekTrace's labels back into the imported traces: one score per label per traced case
    and one trektrace.status. Nothing is sent (see the README for Langfuse's API and a collector)."""
    from trek.trace.export import export_labels

    with options.exit_on(RecordError, FileNotFoundError, ValueError):
        path, n, cases = export_labels(run_dir, fmt, out)
    typer.echo(f"wrote {n} score(s) of {cases} traced case(s) to {path}")
