"""``trek trace``: attribute a run's failures, build the review workbook, measure agreement, view.

    trek trace RUN_DIR [--judge M | --diagnostic-judge M --analysis-judge M] [--model M --base-url U]
    trek trace review RUN_DIR            -> RUN_DIR/review.xlsx
    trek trace review RUN_DIR --sample N [--seed S] [--by dataset]   -> a random review sample
    trek trace shares RUN_DIR [--human FILE] [--by dataset] [--out FILE.csv]   -> label shares, corrected
    trek trace agreement review.xlsx     -> Cohen's kappa, confusion table, disagreements
    trek trace view RUN_DIR              -> RUN_DIR/trace.html
    trek trace verify RUN_DIR [role flags as trek trace] [--live-repair] [--dry-run]   -> RUN_DIR/verify.jsonl
    trek trace export RUN_DIR --format langfuse|otlp --out FILE   -> the labels as trace scores
    trek trace export RUN_DIR --to phoenix|mlflow|otlp URL        -> the labels sent to the server

``trek trace RUN_DIR`` is short for ``trek trace run RUN_DIR``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from trek.cli import options
from trek.errors import FatalLLMError
from trek.pages import GOLD_CHARS, NON_GOLD_CHARS
from trek.roles import role_options
from trek.types import RecordError

__all__ = ["app"]


class _RunByDefault(TyperGroup):
    """A group whose first argument, when it is not a sub-command, is the run of ``run``."""

    def parse_args(self, ctx, args):  # type: ignore[no-untyped-def]
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(rich_markup_mode=None,
    cls=_RunByDefault,
    help="TrekTrace: where did a search-augmented system fail? (`trek trace RUN_DIR` traces a run.)",
    no_args_is_help=True,
)


#: The judges of ``trek trace`` (``--judge`` sets both; each can be set on its own).
JUDGE = role_options("judge", base_url_env="TREK_JUDGE_BASE_URL",
                     model_help="Both judges (unless set one by one): a model name, a judge kind (exact, also "
                     "spelled oracle: decided from the annotations of TrekBench-Mini or Ctrl contexts, no model call, "
                     "undecided where unsure), or a cascade exact,MODEL (the model answers only what the exact judge "
                     "leaves undecided); see docs/judges.md.",
                     base_url_help="Endpoint of the judges (default: $OPENAI_BASE_URL, else OpenAI's).")
DIAGNOSTIC = role_options("diagnostic-judge", model_help="Model that extracts and matches evidence.",
                          old={"--diagnostic-base-url": "base-url"})
ANALYSIS = role_options("analysis-judge", model_help="Model that assesses queries and grades probes.",
                        old={"--analysis-base-url": "base-url"})
AUDIT = role_options("audit-judge", model_help="With an oracle judge: also ask this model every step the exact "
                     "judge answered (recorded beside it; decides nothing).")
EVALUATED = role_options("model", model_help="Evaluated model for the probes (default: the run's model).",
                         base_url_help="Endpoint of the evaluated model (default: the one the run records; an "
                         "imported run that records none needs it).")


def _judge_roles(o: Any, audit: Any = None) -> dict[str, Any]:
    """The diagnostic and analysis judges (``--judge`` fills what they leave unset), the
    evaluated model and, given its option group, the audit judge, of ``trek trace`` and ``trek
    trace verify``."""
    def role(group: Any) -> Any:
        return group.role(o.prices, o.max_connections)

    j = role(o.judge)  # once: an old spelling of its flags is announced once
    roles = {"diagnostic": options.or_role(role(o.diagnostic), j), "analysis": options.or_role(role(o.analysis), j),
             "evaluated": role(o.evaluated)}
    if audit is not None:
        roles["audit"] = options.or_role(role(audit), j, model=False)
    return roles


@dataclasses.dataclass(frozen=True)
class TraceOptions:
    """The options of ``trek trace run`` after the run, in their ``--help`` order."""

    judge: JUDGE = options.GROUP
    diagnostic: DIAGNOSTIC = options.GROUP
    analysis: ANALYSIS = options.GROUP
    audit: AUDIT = options.GROUP
    evaluated: EVALUATED = options.GROUP
    check_stale: bool = typer.Option(False, "--check-stale", help="Also ask whether the gold pages still support "
                                     "the reference (listed first for review).")
    fetch: bool = typer.Option(False, "--fetch", help="Fetch pages missing from the run's page store.")
    budget: float = options.BUDGET
    prices: Path = options.PRICES
    unknown: str = typer.Option("incomplete", "--unknown-judgments",
                                help="How a judgment that stays unreadable counts: incomplete (the test did not "
                                "run; the case gets no label from it) or paper (an unknown value placed by the "
                                "C.4 rules as printed, Randomness as the residual).")
    gold_chars: int = typer.Option(GOLD_CHARS, "--gold-chars", min=1, help="Characters shown of each gold page.")
    other_chars: int = typer.Option(NON_GOLD_CHARS, "--other-chars", min=1,
                                    help="Characters shown of every other page.")
    max_connections: int = options.MAX_CONNECTIONS
    max_retries: int = options.MAX_RETRIES
    prompts: Path = options.PROMPTS
    spending: options.Spending = options.GROUP
    progress: bool = options.PROGRESS
    exact_rule: str = options.EXACT_RULE
    audit_limit: int = typer.Option(None, "--audit-limit", min=1,
                                    help="--audit-judge: audit only the first N traced cases (question order).")

    def roles(self) -> dict[str, Any]:
        """The roles of :func:`trek.trace.session.trace_with_roles`: ``--judge`` fills what the
        diagnostic, analysis and audit judges leave unset."""
        return _judge_roles(self, audit=self.audit)

    def settings(self) -> dict[str, Any]:
        """The other keywords of :func:`trek.trace.session.trace_with_roles`."""
        spending, budget = self.spending, self.budget
        return dict(exact_rule=self.exact_rule, unknown=self.unknown, announce=options.say_roles,
                    proceed=lambda est, ledger: spending.proceed(est, budget, ledger=ledger),
                    client_settings={"max_retries": self.max_retries, "assume_output": spending.assume_output},
                    fetch=self.fetch, check_stale=self.check_stale, budget_usd=budget, progress=self.progress,
                    audit_cases=self.audit_limit, gold_chars=self.gold_chars, other_chars=self.other_chars)


@app.command("run")
@options.grouped
def run_command(
    run_dir: Path = typer.Argument(..., help="A graded run directory (questions, answers, grades)."),
    o: TraceOptions = options.GROUP,
) -> None:
    """Trace every failed answer of a run and write RUN_DIR/trace.jsonl.

    A judge given as oracle (--judge, --diagnostic-judge or --analysis-judge) is the exact judge: it
    answers from the annotations of TrekBench-Mini and makes no call; a run it cannot answer for
    (questions or pages not annotated, no local search) is refused. --audit-judge M asks model M
    every step the exact judge answered, recorded beside it (audit_steps); compare with
    `trek judge audit RUN`. The evaluated model is the run's own at the endpoint its run.json
    records; a run that records no endpoint (an imported log) needs --base-url.

    Resumable and cached: finished cases are kept, pending and failed ones retried, and replies
    come from the run's LLM cache. A case whose needed test could not run (no gold page, a judge
    reply that stayed unreadable) is incomplete: no label from that test. --budget is a ceiling
    over every invocation on the run, all roles together (RUN_DIR/.trace.jsonl.spend). Exit code 0
    when every case is fully traced, 2 for bad input, 3 while cases are incomplete or pending,
    while answered questions have no grade (run trek grade first) or a grade that is unparsed or
    pending, or while answers are pending; 4 when only failed cases are left (calls the endpoint
    rejected).
    """
    from trek import templates
    from trek.graders.common import explain_unsupported_parameter
    from trek.trace.session import trace_with_roles

    with options.exit_on(FatalLLMError, RecordError, ValueError, FileNotFoundError, hint=explain_unsupported_parameter), \
            templates.prompts_folder(o.prompts):
        report = trace_with_roles(run_dir, **o.roles(), **o.settings())
    if report is not None:
        _finish(run_dir, report)


def _finish(run_dir: Path, report: object) -> None:
    """Print the report; exit 3 while the run has ungraded answers or unfinished cases."""
    typer.echo(report.describe())  # type: ignore[attr-defined]
    ungraded = report.selection.skipped.get("ungraded", 0)  # type: ignore[attr-defined]
    if ungraded:
        typer.echo(f"not finished: {ungraded} answered question(s) have no grade, so their failures are not known "
                   f"yet: grade the run first (trek grade {run_dir} --judge MODEL), then trace it again", err=True)
        raise typer.Exit(3)
    skipped = report.selection.skipped  # type: ignore[attr-defined]
    if skipped.get("undecided", 0):
        typer.echo(f"not finished: {skipped['undecided']} grade(s) are undecided (the judge could not support a "
                   f"verdict), so whether those answers failed is not known: grade them with a cascade (trek grade "
                   f"{run_dir} --judge exact,MODEL), then trace the run again", err=True)
        raise typer.Exit(3)
    unsure = {k: skipped.get(k, 0) for k in ("unparsed", "pending") if skipped.get(k, 0)}
    if unsure:
        # a grade that could not be read (or was never returned) hides whether the answer failed:
        # those cases are neither traced nor known to be right, so the run is not finished
        what = " and ".join(f"{n} {k}" for k, n in unsure.items())
        regrade = " --regrade unparsed" if "unparsed" in unsure else ""
        typer.echo(f"not finished: {what} grade(s), so whether those answers failed is not known: grade them "
                   f"(trek grade {run_dir} --judge MODEL{regrade}), then trace the run again", err=True)
        raise typer.Exit(3)
    if skipped.get("pending_answer", 0):
        typer.echo(f"not finished: {skipped['pending_answer']} answer(s) are still pending: finish the run with the "
                   "command that made it (run again), grade it, then trace it again", err=True)
        raise typer.Exit(3)
    unfinished = report.pending or report.incomplete  # type: ignore[attr-defined]
    if unfinished or report.failed:  # type: ignore[attr-defined]
        reason = report.totals.unfinished_error  # type: ignore[attr-defined]
        if reason:
            typer.echo(f"why not finished, e.g.: {reason}", err=True)
        typer.echo(f"not finished: {report.incomplete} incomplete, {report.pending} pending and "  # type: ignore[attr-defined]
                   f"{report.failed} failed case(s); pending and failed ones are retried by the same command, "  # type: ignore[attr-defined]
                   "incomplete ones once their pages are there (trek trace --fetch, or pages added to the run's "
                   "page store)", err=True)
        _say_stuck(report)
        raise typer.Exit(3 if unfinished else 4)  # 4: only cases whose calls the endpoint rejected


def _say_stuck(report: object) -> None:
    """Name what would change the incomplete cases whose replies stayed unreadable: the re-asks are
    spent and the replies cached, so running the same command again changes nothing."""
    unreadable = sum(n for k, n in report.incomplete_reasons().items() if "unreadable" in k)  # type: ignore[attr-defined]
    if unreadable:
        typer.echo(f"not finished: {unreadable} test(s) of the incomplete cases rest on judge or probe replies that "
                   "stayed unreadable after every re-ask; the same command cannot change them (the replies are "
                   "cached). What would: --unknown-judgments paper (an unknown value placed by the C.4 rules), "
                   "another judge (--judge, --diagnostic-judge, --analysis-judge), or templates the model follows "
                   "(--prompts)", err=True)


@dataclasses.dataclass(frozen=True)
class VerifyOptions:
    """The options of ``trek trace verify`` after the run: the roles of ``trek trace``."""

    judge: JUDGE = options.GROUP
    diagnostic: DIAGNOSTIC = options.GROUP
    analysis: ANALYSIS = options.GROUP
    evaluated: EVALUATED = options.GROUP
    live_repair: bool = typer.Option(False, "--live-repair", help="On a run that searched the live web: search the "
                                     "repaired queries there now and count the result (a search at a later date).")
    max_probes: int = typer.Option(None, "--max-probes", min=1, help="At most N gold-plus-noise probes per distractor "
                                   "search; a search that needs more is inconclusive (default: no limit).")
    fetch: bool = typer.Option(False, "--fetch", help="Fetch pages missing from the run's page store.")
    budget: float = options.BUDGET
    prices: Path = options.PRICES
    gold_chars: int = typer.Option(GOLD_CHARS, "--gold-chars", min=1, help="Characters shown of each gold page.")
    other_chars: int = typer.Option(NON_GOLD_CHARS, "--other-chars", min=1,
                                    help="Characters shown of every other page.")
    max_connections: int = options.MAX_CONNECTIONS
    max_retries: int = options.MAX_RETRIES
    prompts: Path = options.PROMPTS
    spending: options.Spending = options.GROUP
    progress: bool = options.PROGRESS
    exact_rule: str = options.EXACT_RULE

    def roles(self) -> dict[str, Any]:
        """The roles of :func:`trek.trace.session.verify_with_roles`, as ``trek trace`` makes them."""
        return _judge_roles(self)

    def settings(self) -> dict[str, Any]:
        spending, budget = self.spending, self.budget
        return dict(exact_rule=self.exact_rule, announce=options.say_roles,
                    client_settings={"max_retries": self.max_retries, "assume_output": spending.assume_output},
                    proceed=lambda est, ledger: spending.proceed(est, budget, ledger=ledger), fetch=self.fetch,
                    live_repair=self.live_repair, max_probes=self.max_probes, budget_usd=self.budget, progress=self.progress,
                    gold_chars=self.gold_chars, other_chars=self.other_chars)


@app.command("verify")
@options.grouped
def verify_command(
    run_dir: Path = typer.Argument(..., help="A traced run directory (trek trace first)."),
    o: VerifyOptions = options.GROUP,
) -> None:
    """Put the labels to the test and write RUN_DIR/verify.jsonl.

    A case labelled Distraction gets a distractor search: the gold-plus-noise probe asked again,
    same template and page order, with the gold pages and subsets of the noise pages, to a 1-minimal
    set of pages that flips the answer. A case labelled Pre-retrieval or Retrieval gets a query
    repair: the diagnostic judge's adequate queries searched again on the run's backend. Each
    record says confirmed, refuted, inconclusive or skipped, with the reason; the labels in
    trace.jsonl are never changed. Cached and resumable: a second run sends nothing. --dry-run
    prints the calls, tokens and dollars it would need (low: every label refuted at once; high:
    every search at its worst) and writes nothing. --budget is a ceiling over every invocation on
    the run, all roles together (RUN_DIR/.verify.jsonl.spend): when it is reached, the experiments
    left are pending and the same command with a larger budget resumes them. Exit code 0 when
    every experiment has a verdict, 2 for bad input, 3 while experiments are pending, 4 when only
    failed ones are left.
    """
    from trek import templates
    from trek.trace.session import verify_with_roles

    with options.exit_on(FatalLLMError, RecordError, ValueError, FileNotFoundError), templates.prompts_folder(o.prompts):
        report = verify_with_roles(run_dir, **o.roles(), **o.settings())
    if report is None:  # --dry-run: the estimate was printed
        return
    typer.echo(report.describe())
    pending, failed = report.statuses["pending"], report.statuses["failed"]
    if pending or failed:
        first = min((r.error or "") for r in report.records if r.status in ("pending", "failed"))
        if first:
            typer.echo(f"why not finished, e.g.: {first}", err=True)
        typer.echo(f"not finished: {pending} pending and {failed} failed experiment(s); resume with the same command "
                   f"(a larger --budget where the budget ran out): {options.resume_command()}", err=True)
        raise typer.Exit(3 if pending else 4)


@app.command("review")
def review_command(
    run_dir: Path = typer.Argument(..., help="A traced run directory."),
    out: Path = typer.Option(None, "--out", help="Workbook path (default: RUN_DIR/review.xlsx); a .csv path with "
                             "--sample writes the sample as the CSV `trek trace shares --human` reads."),
    sample: int = typer.Option(None, "--sample", min=1, help="Offer a uniformly random sample of N fully traced "
                               "cases (recorded in the workbook's sample sheet), for `trek trace shares`."),
    seed: int = typer.Option(0, "--seed", min=0, max=2**53, help="--sample: the seed of the draw (the same seed gives "
                             "the same cases), 0 to 2^53."),
    by: str = typer.Option(None, "--by", metavar="dataset", help="--sample: stratify by dataset (proportional)."),
    prefill: bool = typer.Option(False, "--prefill", help="A .csv --out: fill the label columns with the trace's "
                                 "own labels (on a run the exact judge traced: the truth; a stand-in review)."),
    force: bool = typer.Option(False, "--force", help="Replace a workbook or CSV that already holds a reviewer's "
                               "verdicts (without it such a file is never overwritten)."),
    design: str = typer.Option(None, "--design", metavar="uniform|stratified", help="--sample: uniform (the "
                               "default) or stratified by dataset (the same as --by dataset)."),
    plan: float = typer.Option(None, "--plan", metavar="POINTS", help="Write nothing; say how many random reviews "
                               "buy +/- POINTS on each label's rate (with --human PILOT: also with the judge)."),
    human: Path = typer.Option(None, "--human", help="--plan: a filled pilot review (a small random sample; a "
                               "CSV's draw is the one --seed and --by give)."),
) -> None:
    """Write the review workbook: checklist, retrieval audit and taxonomy sheets (and, with
    --sample, only the sampled cases and a sheet saying how they were drawn). A file at the
    path that holds any verdict is replaced only with --force."""
    from trek.trace.pipeline import load_trace
    from trek.trace.review import write_review
    from trek.trace.shares import draw_sample, review_plan_text

    with options.exit_on(RecordError, FileNotFoundError, ValueError):
        if plan is not None or human is not None:
            typer.echo(review_plan_text(run_dir, plan, human, seed=seed, by=options_design(design, by)))
            return
        by = options_design(design, by)
        if sample is None and (by is not None or prefill):
            raise ValueError("--by, --design and --prefill go with --sample N")
        drawn = draw_sample(load_trace(run_dir), sample, seed, by) if sample is not None else None
        path = write_review(run_dir, out, sample=drawn, prefill=prefill, force=force)
    typer.echo(f"wrote {path}" + (f": {drawn.describe()}" if drawn is not None else ""))


def options_design(design: str | None, by: str | None) -> str | None:
    """``--by`` from ``--design`` (uniform or stratified) and ``--by``."""
    if design not in (None, "uniform", "stratified"):
        raise ValueError(f"--design must be uniform or stratified, got {design!r}")
    if design is not None and by is not None and design != "stratified":
        raise ValueError(f"--design {design} and --by {by} disagree; give one of them")
    return "dataset" if design == "stratified" else by


@app.command("shares")
def shares_command(
    run_dir: Path = typer.Argument(..., help="A traced run directory."),
    human: Path = typer.Option(None, "--human", help="The human verdicts: the filled workbook of `trek trace review "
                               "--sample`, or a CSV with question_id and one 0/1 column per label."),
    by: str = typer.Option(None, "--by", metavar="dataset", help="Also per dataset."),
    alpha: float = typer.Option(0.05, "--alpha", min=0.0, max=1.0, help="1 - confidence level of every interval."),
    out: Path = typer.Option(None, "--out", help="Also write the table as CSV to this file."),
    labels_from: str = typer.Option("trace", "--labels-from", metavar="trace|audit", help="The judge's labels: the trace's "
                              "(trace), or those the audit judge's verdicts give (audit: a run traced with --judge "
                              "oracle --audit-judge M, where the exact judge is the truth)."),
    seed: int = typer.Option(None, "--seed", help="A CSV --human: the seed of the `trek trace review --sample` draw "
                             "it reviews (its ids must be that draw)."),
    sample_by: str = typer.Option(None, "--sample-by", metavar="dataset", help="A CSV --human: that draw was "
                                  "stratified by dataset."),
    allow_unsampled: bool = typer.Option(False, "--allow-unsampled", help="Take reviewed cases that are not a random "
                                         "sample anyway; every row is flagged 'not random' (intervals not valid)."),
    estimand: str = typer.Option("population", "--estimand", metavar="population|traced", help="With --human: what "
                                 "the corrected share estimates: the label's rate in the population the questions "
                                 "come from (population), or its share among these traced cases only (traced)."),
) -> None:
    """Label shares of the fully traced cases with intervals; with --human, corrected for the
    judge's errors by prediction-powered inference (PPI++) from a random review sample.

    The corrected share is, by default, the label's rate in the population the questions come
    from (the traced cases a sample of it); --estimand traced gives the share among these traced
    cases (a narrower interval about this run only). The CSV's estimand column says which.

    Per label (and dataset with --by dataset): n_traced, n_reviewed, judge_share with its Wilson
    interval, corrected_share with low and high, and human_only_share with its Wilson interval
    over the reviewed cases (shares as proportions in the CSV, percent on screen). Exit code 0,
    2 for bad input (a bad human file names the row).
    """
    from trek.trace.shares import write_shares

    with options.exit_on(RecordError, FileNotFoundError, ValueError):
        text, target = write_shares(run_dir, human, by=by, alpha=alpha, out=out, judge=labels_from, seed=seed,
                                    sample_by=sample_by, allow_unsampled=allow_unsampled, estimand=estimand)
    typer.echo(text)
    if target is not None:
        typer.echo(f"wrote {target}")


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
    """Write one self-contained HTML page of the traced cases (filters by label and dataset); after
    trek trace verify, each case shows its verdicts, minimal distracting set and repaired queries."""
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
    run_dir: Path = typer.Argument(..., help="A traced run imported from traces (trek import "
                                   "otlp|langfuse|phoenix|mlflow)."),
    fmt: str = typer.Option(None, "--format", metavar="FORMAT", help="langfuse (score rows, JSONL) or otlp "
                            "(gen_ai.evaluation.result events in the imported traces, OTLP/JSON); with --out."),
    out: Path = typer.Option(None, "--out", help="The file to write (outside the run directory)."),
    to: tuple[str, str] = typer.Option(None, "--to", metavar="DEST URL",
                                       help="Send instead of writing: phoenix URL (span annotations on each trace's "
                                       "root span), mlflow TRACKING_URI (feedback assessments) or otlp URL "
                                       "(OTLP/HTTP protobuf to a collector)."),
) -> None:
    """Write TrekTrace's labels back into the imported traces: one score per label per traced case
    and one trektrace.status (after trek trace verify, also one trektrace.verify_<experiment> verdict
    per experiment, with the minimal set or the repaired queries), as a file (--format F --out
    FILE) or sent to a server (--to DEST URL)."""
    dest, url = to if to else (None, None)
    if dest is None and fmt is None:
        options.fail("say where the labels go: --format langfuse|otlp --out FILE, or --to phoenix|mlflow|otlp URL")
    if dest is not None and (fmt is not None or out is not None):
        options.fail("--to sends the labels; --format and --out write them to a file: give one or the other")
    if dest is not None:
        from trek.trace.destinations import send_labels

        with options.exit_on(RecordError, FileNotFoundError, ValueError, RuntimeError, LookupError):
            sent = send_labels(run_dir, dest, url)
        typer.echo(sent.describe())
        return
    if out is None:
        options.fail("--format writes a file: give it with --out FILE")
    from trek.trace.export import export_labels

    with options.exit_on(RecordError, FileNotFoundError, ValueError):
        path, n, cases = export_labels(run_dir, fmt, out)
    typer.echo(f"wrote {n} score(s) of {cases} traced case(s) to {path}")
