"""``trek grade``: grade a run's answers with each dataset's own protocol; the work is done by
:func:`trek.grading.run_grading`."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import typer

from trek import textable
from trek.cli import options
from trek.errors import FatalLLMError
from trek.graders.common import explain_unsupported_parameter
from trek.roles import role_options
from trek.types import RecordError

#: The accuracy table's columns as ``trek grade`` prints them: (column of
#: :func:`trek.analysis.accuracy_by_dataset` or the interval, short name, what it means). Short
#: names keep the table within 80 columns; :func:`format_accuracy` prints this key below it.
ACCURACY_COLUMNS = (
    ("accuracy", "acc", "% correct of n"),
    ("95% CI", "95% CI", "interval of acc"),
    ("n", "n", "questions"),
    ("answered", "ans", "answered"),
    ("graded", "grad", "graded (a verdict)"),
    ("correct", "corr", "correct"),
    ("undecided", "und", "undecided"),
    ("unparsed", "unp", "unparsed"),
    ("pending", "pend", "pending"),
    ("acc_graded", "acc/g", "% correct of grad"),
)


def format_accuracy(table: Any, limit: int | None = None) -> str:
    """A plain-text rendering of :func:`trek.analysis.accuracy_by_dataset`'s table: accuracy over
    every question with its interval, the counts behind it, and accuracy over graded answers,
    under short column names, then a key to those names; no wider than ``limit`` (default: the
    terminal's width)."""
    shown = table.copy()
    pct = lambda v: "-" if v != v else f"{v:.1f}"  # noqa: E731
    shown["accuracy"] = [pct(v) for v in table["accuracy"]]
    shown["95% CI"] = [
        ("-" if lo != lo else f"[{lo:.1f}, {hi:.1f}]") for lo, hi in zip(table["ci_low"], table["ci_high"], strict=True)
    ]
    shown["acc_graded"] = [pct(v) for v in table["acc_graded"]]
    shown = shown[[c for c, _, _ in ACCURACY_COLUMNS]]
    shown.columns = [short for _, short, _ in ACCURACY_COLUMNS]
    key = [(short, meaning) for _, short, meaning in ACCURACY_COLUMNS]
    return textable.frame(shown, limit=limit) + "\n" + textable.legend(key, limit=limit)


JUDGE = role_options("judge", required=True, base_url_env="TREK_JUDGE_BASE_URL", old={"--base-url": "base-url"},
                     model_help="Judge: a model name (gpt-4.1-mini), a judge kind (exact, also spelled oracle: "
                     "decided from the annotations of TrekBench-Mini or Ctrl contexts, no model call, undecided where "
                     "unsure), or a cascade exact,MODEL (the model grades only what the exact judge leaves undecided).",
                     base_url_help="Endpoint of the judge (default: $OPENAI_BASE_URL, else OpenAI's).")
AUDIT = role_options("audit-judge", model_help="With --judge exact: also ask this model each verdict the exact judge "
                     "gave and record its answers beside them (they decide nothing; compare with `trek judge audit`).")


@dataclasses.dataclass(frozen=True)
class GradeOptions:
    """The options of ``trek grade`` after the run, in their ``--help`` order."""

    judge: JUDGE = options.GROUP
    grader: str = options.GRADER
    regrade: str = typer.Option(None, "--regrade", help="Also grade again: unparsed (the verdicts that could not be "
                                "read, e.g. after fixing the judge's prompts or parameters) or all.")
    max_connections: int = options.MAX_CONNECTIONS
    prompts: Path = options.PROMPTS
    max_retries: int = options.MAX_RETRIES
    seed: int = typer.Option(None, "--seed", help="Sampling seed sent to the judge, where the endpoint supports one.")
    progress: bool = options.PROGRESS
    budget: float = options.BUDGET
    spending: options.Spending = options.GROUP
    batch: options.Batch = options.GROUP
    prices: Path = options.PRICES
    exact_rule: str = options.EXACT_RULE
    audit: AUDIT = options.GROUP
    audit_limit: int = options.AUDIT_LIMIT

    def judge_role(self) -> Any:
        """The judge's role, ``--seed`` among its parameters."""
        role = self.judge.role(self.prices, self.max_connections)
        return dataclasses.replace(role, params={**role.params, **({"seed": self.seed} if self.seed is not None else {})})

    def settings(self, role: Any) -> dict[str, Any]:
        """The keywords of :func:`trek.grading.grade_with_roles` for the judge ``role``."""
        spending, budget = self.spending, self.budget
        return dict(audit=options.or_role(self.audit.role(self.prices, self.max_connections), role, model=False),
                    exact_rule=self.exact_rule, audit_limit=self.audit_limit, regrade=self.regrade,
                    batch=self.batch.settings() if self.batch.enabled else None, prompts_dir=self.prompts,
                    progress=self.progress, budget_usd=budget, announce=options.say_roles,
                    client_settings={"max_retries": self.max_retries, "assume_output": spending.assume_output},
                    proceed=lambda est, ledger: spending.proceed(est, budget, ledger=ledger))


def _hint(message: str) -> str | None:
    return explain_unsupported_parameter(message, sources={"seed": "--seed"})


@options.grouped
def grade_command(
    run_dir: Path = typer.Argument(..., help="Run directory with questions.jsonl and answers.jsonl."),
    o: GradeOptions = options.GROUP,
    human: Path = typer.Option(None, "--human", help="A filled `trek grade review`: also print corrected accuracy."),
) -> None:
    """Grade a run's answers with each dataset's judge and print the accuracy table.

    With --judge oracle the exact judge grades from the annotations (no model call; questions it
    has no annotations for are refused) and --audit-judge MODEL records that model's verdicts
    beside the exact ones (RUN_DIR/audit-grading.jsonl; they decide nothing; `trek judge audit`
    compares). Questions of other datasets (your own, an imported log's) are graded by the
    generic judge (correct / incorrect / not attempted) when their `grader` says so, or with
    --grader generic.

    `trek grade review RUN_DIR --sample N` draws questions for a person to review; --human FILE
    (the filled review) also prints the accuracy corrected for the judge's errors (PPI++).

    Re-running resumes: finished grades are kept, pending ones are retried, and judge replies
    come from the cache (--regrade unparsed|all grades those again). --budget is a ceiling over
    every invocation on the run (RUN_DIR/.grades.jsonl.spend). The API key comes from
    OPENAI_API_KEY. Accuracy is over every question of the run (unanswered, pending and
    unparsed count as not correct; undecided grades, where the judge could not support a verdict,
    too). Exit code 0 when every answered question has a decided
    grade, 2 for bad input, 3 while some grades are pending, unparsed or undecided, 4 when none is but the
    judge's endpoint rejected some (failed; see docs/exit-codes.md).
    """
    from trek import graders
    from trek.audit import audit_grading
    from trek.epochs import epoch_dirs
    from trek.grading import grade_with_roles
    from trek.runs import not_a_run_hint

    with options.exit_on(FatalLLMError, RecordError, ValueError, FileNotFoundError,
                         hint=lambda m: _hint(m) or not_a_run_hint(run_dir)), graders.using(o.grader):
        role = o.judge_role()
        reports = [grade_with_roles(d, role, **o.settings(role), audit_with=audit_grading,
                                    say=lambda text: typer.echo(text, err=True)) for _, d in epoch_dirs(run_dir)]
    if all(r is not None for r in reports):
        _finish(run_dir, reports, human)


def format_epochs(table: Any) -> str:
    """A plain-text rendering of :func:`trek.epochs.epoch_accuracy`'s table."""
    shown = table.copy()
    shown["accuracy"] = ["-" if v != v else f"{v:.1f}" for v in table["accuracy"]]
    shown["95% CI"] = ["-" if lo != lo else f"[{lo:.1f}, {hi:.1f}]" for lo, hi in zip(table["ci_low"], table["ci_high"],
                                                                                   strict=True)]
    shown["correct"] = [f"{v:g}" for v in table["correct"]]
    return textable.frame(shown[["accuracy", "95% CI", "n", "graded", "correct"]])


def _finish(run_dir: Path, reports: list[Any], human: Path | None = None) -> None:
    from trek.analysis import accuracy_by_dataset
    from trek.epochs import epoch_accuracy

    for report in reports:
        typer.echo(report.describe(), err=True)
    if len(reports) == 1:
        typer.echo(format_accuracy(accuracy_by_dataset(run_dir)))
    else:
        typer.echo(f"accuracy per epoch and pooled (each question scored by the mean of its {len(reports)} epochs):")
        typer.echo(format_epochs(epoch_accuracy(run_dir)))
    if human is not None:  # judge-corrected accuracy (trek.grade_review)
        from trek.cli.grade_review import corrected_accuracy_text

        typer.echo(corrected_accuracy_text(run_dir, human))
    pending, failed, unparsed = (sum(getattr(r, k) for r in reports)
                                 for k in ("pending_grades", "failed_grades", "unparsed_grades"))
    if pending or unparsed:
        typer.echo(f"not finished: {pending} pending, {failed} failed and {unparsed} unparsed grade(s): run the same "
                   "command again" + (" with --regrade unparsed" if unparsed else ""), err=True)
        raise typer.Exit(3)
    undecided = sum(r.undecided_grades for r in reports)
    if undecided:
        # grading again with the same judge cannot change these: say what would
        typer.echo(f"not finished: {undecided} grade(s) undecided: the judge could not support a verdict (the reason "
                   f"is in each grade's judge_raw); grade them with a cascade: trek grade {run_dir} --judge "
                   "exact,MODEL", err=True)
        raise typer.Exit(3)
    if failed:
        typer.echo(f"{failed} grade(s) failed: the judge's endpoint rejected those calls (errors above); the same "
                   "command tries them again", err=True)
        raise typer.Exit(4)
