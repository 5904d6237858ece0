"""``trek judge``: the judges themselves.

    trek judge audit RUN_DIR...      -> an LLM judge's verdicts against the exact judge, role by role
"""

from __future__ import annotations

from pathlib import Path

import typer

from trek.cli import options

__all__ = ["app"]

app = typer.Typer(rich_markup_mode=None, help="The judges: measure an LLM judge against the exact judge on annotated runs.",
                  no_args_is_help=True)


@app.command("audit")
def audit_command(
    run_dirs: list[Path] = typer.Argument(..., help="Run directories judged exactly with an audit judge beside "
                                          "(--judge oracle --audit-judge M), or annotated runs an LLM judged."),
    out: Path = typer.Option(None, "--out", help="Also write every pair of verdicts as CSV to this file."),
    force: bool = typer.Option(False, "--force", help="Replace an existing --out file that is not an audit CSV."),
    exact_rule: str = options.EXACT_RULE,
) -> None:
    """Compare an LLM judge's verdicts with the exact judge's, role by role: n, agreement, Cohen's kappa
    with a 95% interval, the confusion table and the cases that disagree.

    Roles: grading, evidence, query_adequacy, gold_only, noise, stale. The LLM verdicts are the
    audit judge's (audit-grading.jsonl, audit_steps in trace.jsonl) or, for a run an LLM judge
    graded or traced, that judge's own, with the exact verdicts worked out from the annotations.
    Exit code 0 (also with no audit data, which it says), 2 for bad input.
    """
    from trek.audit import audit_pairs, describe, write_pairs
    from trek.exact import ExactJudge
    from trek.jsonio import unique_paths
    from trek.types import RecordError

    with options.exit_on(RecordError, ValueError, FileNotFoundError):
        run_dirs, again = unique_paths(run_dirs)
        for d in again:
            typer.echo(f"note: {d} is given more than once; it is counted once", err=True)
        pairs = audit_pairs(run_dirs, ExactJudge(rule=exact_rule))
        if out is not None:
            write_pairs(pairs, out, run_dirs, force=force)
    typer.echo(describe(pairs))
