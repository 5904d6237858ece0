"""``trek grade``: grade a run's answers with each dataset's own protocol; the work is done by
:func:`trek.grading.run_grading`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from trek.cli import options
from trek.graders.common import explain_unsupported_parameter, parse_judge_params
from trek.grading import estimate_grading, run_grading, run_grading_batch
from trek.llm.cache import LLMCache, default_cache_path
from trek.llm.client import LLMClient
from trek.types import RecordError


def format_accuracy(table: Any) -> str:
    """A plain-text rendering of :func:`trek.analysis.accuracy_by_dataset`'s table: accuracy over
    every question with its interval, the counts behind it, and accuracy over graded answers."""
    shown = table.copy()
    pct = lambda v: "-" if v != v else f"{v:.1f}"  # noqa: E731
    shown["accuracy"] = [pct(v) for v in table["accuracy"]]
    shown["95% CI"] = [
        ("-" if lo != lo else f"[{lo:.1f}, {hi:.1f}]") for lo, hi in zip(table["ci_low"], table["ci_high"], strict=True)
    ]
    shown["acc_graded"] = [pct(v) for v in table["acc_graded"]]
    cols = ["accuracy", "95% CI", "n", "answered", "graded", "correct", "unparsed", "pending", "acc_graded"]
    return shown[cols].to_string()


@options.grouped
def grade_command(
    run_dir: Path = typer.Argument(..., help="Run directory with questions.jsonl and answers.jsonl."),
    judge: str = typer.Option(..., "--judge", help="Judge model name, e.g. gpt-4.1-mini; oracle: the exact judge "
                              "(decided from the annotations of TrekBench-Mini or Ctrl contexts, no model call)."),
    grader: str = typer.Option(None, "--grader", help="Grade every question with this grader (generic, freshqa, "
                               "infodeepseek, sealqa) instead of each question's own."),
    judge_base_url: str = options.JUDGE_BASE_URL,
    base_url: str = typer.Option(None, "--base-url", hidden=True, help="Deprecated here: use --judge-base-url."),
    max_connections: int = options.MAX_CONNECTIONS,
    prompts: Path = options.PROMPTS,
    max_retries: int = options.MAX_RETRIES,
    seed: int = typer.Option(None, "--seed", help="Sampling seed sent to the judge, where the endpoint supports one."),
    judge_param: list[str] = options.JUDGE_PARAM,
    progress: bool = options.PROGRESS,
    budget: float = options.BUDGET,
    spending: options.Spending = options.GROUP,
    batch: options.Batch = options.GROUP,
    prices: Path = options.PRICES,
    exact_rule: str = options.EXACT_RULE,
    audit_judge: str = options.AUDIT_JUDGE,
    audit_limit: int = options.AUDIT_LIMIT,
) -> None:
    """Grade a run's answers with each dataset's judge and print the accuracy table.

    With --judge oracle the exact judge grades from the annotations (no model call; questions it has
    no annotations for are refused) and --audit-judge MODEL records that model's verdicts beside
    the exact ones (RUN_DIR/audit-grading.jsonl; they decide nothing; `trek judge audit` compares).

    Questions of other datasets (your own, an imported log's) are graded by the generic judge
    (correct / incorrect / not attempted) when their `grader` says so, or with --grader generic.

    Re-running resumes: finished grades are kept, pending ones are retried, and judge replies
    come from the cache. --budget is a ceiling over every invocation on the run (the judge's
    spend is recorded in RUN_DIR/.grades.jsonl.spend). The API key comes from OPENAI_API_KEY. Accuracy is over every question
    of the run (unanswered, pending and unparsed count as not correct). Exit code 0 when every
    answered question has a decided grade, 2 for bad input, 3 while some grades are pending, failed
    or unparsed (run the same command again to retry pending and failed ones). The judge's endpoint
    is --judge-base-url, as in every command (--base-url is the evaluated model's).
    """
    from trek import graders
    from trek.exact import ORACLE
    from trek.llm.client import FatalLLMError
    from trek.llm.ledger import ledger_path
    from trek.llm.usage import PriceTable
    from trek.runs import GRADES

    def hint(message: str) -> str | None:
        return explain_unsupported_parameter(message, sources={"seed": "--seed"})

    with options.exit_on(FatalLLMError, RecordError, ValueError, FileNotFoundError, hint=hint), \
            graders.using(grader):
        if not run_dir.is_dir():
            raise RecordError(run_dir, None, "run directory does not exist")
        if judge == ORACLE and spending.dry_run:
            typer.echo("trek grade with the exact judge (oracle): 0 model calls, $0.00"
                       + (f"; the audit judge {audit_judge} grades the same answers once more (estimate it with "
                          f"trek grade RUN --judge {audit_judge} --dry-run)" if audit_judge else ""))
            return
        if judge == ORACLE:
            report = _grade_exactly(run_dir, exact_rule, audit_judge, audit_limit, batch.enabled, progress,
                                    lambda m: LLMClient(m, base_url=options.deprecated_base_url(
                                        "trek grade", base_url, judge_base_url), max_connections=max_connections,
                                        max_retries=max_retries, cache=LLMCache(default_cache_path(run_dir)),
                                        progress=progress, prices=PriceTable.load(prices)),
                                    parse_judge_params(judge_param) | ({"seed": seed} if seed is not None else {}))
            _finish(run_dir, report)
            return
        if audit_judge:
            options.fail("--audit-judge records a model's verdicts beside the exact judge's: use it with --judge oracle")
        client = LLMClient(
            judge,
            base_url=options.deprecated_base_url("trek grade", base_url, judge_base_url),
            max_connections=max_connections,
            max_retries=max_retries,
            cache=LLMCache(default_cache_path(run_dir)),
            progress=progress,
            prices=PriceTable.load(prices),
            budget_usd=budget,
            assume_output=spending.assume_output,
        )
        settings = parse_judge_params(judge_param)
        if seed is not None:
            settings["seed"] = seed
        options.say_roles({"judge": client})
        est = estimate_grading(run_dir, client, prompts_dir=prompts, batch=batch.enabled,
                               assume_output=spending.assume_output, **settings)
        if not spending.proceed(est, budget, ledger=ledger_path(run_dir / GRADES)):
            return
        if batch.enabled:
            report, br = run_grading_batch(run_dir, client, prompts_dir=prompts, progress=progress,
                                           **batch.settings(), **settings)
            typer.echo(br.describe(), err=True)
        else:
            report = run_grading(run_dir, client, prompts_dir=prompts, progress=progress, **settings)
    _finish(run_dir, report)


def _grade_exactly(run_dir: Path, rule: str, audit_judge: str | None, audit_limit: int | None, batch: bool,
                   progress: bool, make_client: Any, settings: dict[str, Any]) -> Any:
    """``trek grade --judge oracle``: the exact grades, then the audit judge's verdicts beside them."""
    from trek.exact import ExactJudge
    from trek.grading import run_grading

    if batch:
        options.fail("--batch sends model calls: the exact judge (oracle) makes none")
    exact = ExactJudge(rule=rule)
    audit = make_client(audit_judge) if audit_judge else None
    options.say_roles({"judge": exact, "audit judge": audit})
    report = run_grading(run_dir, exact, progress=progress)
    if audit is not None:
        from trek.audit import audit_grading

        rep = audit_grading(run_dir, audit, limit=audit_limit, progress=progress, **settings)
        typer.echo(rep.describe(), err=True)
    return report


def _finish(run_dir: Path, report: Any) -> None:
    from trek.analysis import accuracy_by_dataset

    typer.echo(report.describe(), err=True)
    typer.echo(format_accuracy(accuracy_by_dataset(run_dir)))
    if report.pending_grades or report.unparsed_grades or report.failed_grades:
        typer.echo(
            f"not finished: {report.pending_grades} pending, {report.failed_grades} failed and "
            f"{report.unparsed_grades} unparsed grade(s)",
            err=True,
        )
        raise typer.Exit(3)
