"""``trek ctrl run``: the Ctrl baselines over frozen contexts, one run directory per (model, method, condition)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from trek.cli import options
from trek.roles import role_options

__all__ = ["ctrl_run_command", "DEFAULT_METHODS", "DEFAULT_CONDITIONS"]

DEFAULT_METHODS = "direct,rerank,filter,structured"
DEFAULT_CONDITIONS = "OO,MND,SAA,SBA,GOLD"


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


JUDGE = role_options("judge", base_url_env="TREK_JUDGE_BASE_URL",
                     model_help="Grade every run afterwards with this judge model (oracle: the exact judge, from the "
                     "contexts' annotations; no model call).",
                     base_url_help="Endpoint of the judge (default: $OPENAI_BASE_URL, else OpenAI's).")
AUDIT = role_options("audit-judge", model_help="With --judge oracle: also ask this model each verdict the exact judge "
                     "gave and record its answers beside them (they decide nothing).")
RERANKER = role_options("reranker", default="wordllama", params=False, base_url_env="TREK_RERANK_BASE_URL",
                        old={"--rerank-scorer": "model", "--rerank-base-url": "base-url"},
                        model_help="Rerank relevance: wordllama (offline), rerank:MODEL or score:MODEL (an endpoint).",
                        base_url_help="Endpoint of rerank:/score: rerankers (e.g. vLLM's http://host:8000/v1).")


@options.grouped
def ctrl_run_command(
    contexts: Path = typer.Argument(..., help="contexts.jsonl written by `trek ctrl build`."),
    model: str = typer.Option(..., "--model", "-m", help="The model to evaluate."),
    runs: Path = typer.Option(..., "--runs", help="Folder for the run directories (re-run the same command to resume)."),
    base_url: str = options.BASE_URL,
    methods: str = typer.Option(DEFAULT_METHODS, "--methods", help="Comma-separated: direct, rerank, filter, structured."),
    conditions: str = typer.Option(DEFAULT_CONDITIONS, "--conditions",
                                   help="Comma-separated conditions (ablations too, e.g. OO:gold=first,OO:k=5)."),
    questions: Path = typer.Option(None, "--questions",
                                   help="questions.jsonl or pools.jsonl (default: the one beside CONTEXTS)."),
    all_on_gold: bool = typer.Option(False, "--all-on-gold", help="Run every method on GOLD (default: Direct only)."),
    effort: str = typer.Option(None, "--effort", help="reasoning_effort sent with every call (not sent when unset)."),
    temperature: float = typer.Option(None, "--temperature", callback=options.number(0, 2), help="Sampling temperature (not sent when unset)."),
    max_tokens: int = typer.Option(None, "--max-tokens", min=1, help="max_completion_tokens (not sent when unset)."),
    reranker: RERANKER = options.GROUP,
    sigma_days: float = typer.Option(365.0, "--sigma-days", callback=options.POSITIVE, help="Rerank: width of the Gaussian temporal decay, in days."),
    combine: str = typer.Option("product", "--combine", help="Rerank: product or sum of relevance and temporal weight."),
    alpha: float = typer.Option(0.5, "--alpha", callback=options.number(0, 1), help="Rerank with --combine sum: weight of relevance."),
    top_k: int = typer.Option(10, "--top-k", min=1, help="Rerank: documents passed to the answer prompt."),
    after_cutoff: str = typer.Option("decay", "--after-cutoff", help="Rerank: documents dated after the cutoff decay or get zero."),
    empty_fallback: str = typer.Option("all", "--empty-fallback",
                                       help="Filter: on an empty or unreadable selection answer from all or none."),
    max_reasks: int = typer.Option(2, "--max-reasks", min=0, help="Re-asks of an unreadable JSON reply (Filter, Structured)."),
    structured_json: bool = typer.Option(
        False, "--structured-json/--no-structured-json",
        help="Structured: ask for the final answer as JSON (contrast, answer), schema-constrained where the "
        "endpoint supports it, instead of the #Answer: line. Off by default (the paper's format)."),
    judge_role: JUDGE = options.GROUP,
    audit: AUDIT = options.GROUP,
    max_connections: int = options.MAX_CONNECTIONS,
    budget: float = options.BUDGET,
    timeout: float = options.TIMEOUT,
    max_retries: int = options.MAX_RETRIES,
    prices: Path = options.PRICES,
    prompts: Path = options.PROMPTS,
    spending: options.Spending = options.GROUP,
    progress: bool = options.PROGRESS,
) -> None:
    """Run the Ctrl baselines on frozen contexts and record one standard run per (model, method, condition).

    Model calls per question: direct 1, rerank 1, filter 2, structured 2 (plus re-asks of unreadable
    replies); gold-only is direct on GOLD. --budget is one ceiling for the model and the judge
    over every invocation on RUNS (recorded in RUNS/.ctrl.spend). Exit code 0 when every answer
    is in, 3 when some are pending or failed (run the same command again), 2 on bad input.
    """
    from trek import templates
    from trek.contexts import read_contexts

    j, r = judge_role.role(), reranker.role()
    a = options.or_role(audit.role(), j, model=False)
    judge, judge_base_url, audit_judge, scorer, rerank_base_url = j.model, j.base_url, a.model, r.model, r.base_url
    from trek.exact import ORACLE, ExactJudge
    from trek.llm.cache import LLMCache
    from trek.llm.client import FatalLLMError
    from trek.llm.ledger import spending as ledger_for
    from trek.llm.usage import PriceTable
    from trek.rag import make_method
    from trek.rag.context import load_ctrl_questions, questions_beside
    from trek.rag.rerank import make_scorer
    from trek.rag.runner import (
        estimate_grid,
        estimate_grid_grading,
        grid_ledger,
        grid_rows,
        plan_grid,
        run_ctrl,
    )
    from trek.roles import EVALUATED, Role
    from trek.runs import RunDir, default_cache_path
    from trek.types import RecordError

    with (
        options.exit_on(FatalLLMError, RecordError, ValueError, FileNotFoundError, TypeError),
        templates.prompts_folder(prompts),
    ):
        from trek.outputs import make_folder
        from trek.runs import RunDir

        RunDir(runs).check_target("ctrl", option="--runs", grid=True)
        method_names = _split(methods)
        cond_names = _split(conditions)
        records = read_contexts(contexts, check_rendering=True)
        qpath = questions or questions_beside(contexts)
        if qpath is None:
            options.fail(f"no questions.jsonl or pools.jsonl beside {contexts}: pass --questions FILE")
        qs = load_ctrl_questions(qpath)
        cache_path = default_cache_path(runs)
        if not spending.dry_run:
            make_folder(runs, "--runs")
        cache = LLMCache(cache_path) if not spending.dry_run or cache_path.exists() else None  # a dry run writes nothing
        settings: dict[str, dict[str, Any]] = {
            "rerank": {"scorer": None, "sigma_days": sigma_days, "combine": combine, "alpha": alpha, "k": top_k,
                       "after_cutoff": after_cutoff},
            "filter": {"empty_fallback": empty_fallback, "max_reasks": max_reasks},
            "structured": {"max_reasks": max_reasks, "json_answer": structured_json},
        }
        if "rerank" in method_names:
            settings["rerank"]["scorer"] = make_scorer(scorer, base_url=rerank_base_url, cache=cache)
        built = {m: make_method(m, **settings.get(m, {})) for m in method_names}
        cells = plan_grid(model, method_names, cond_names, runs, all_methods_on_gold=all_on_gold)
        params: dict[str, Any] = {}
        if effort:
            params["reasoning_effort"] = effort
        if temperature is not None:
            params["temperature"] = temperature
        if max_tokens is not None:
            params["max_completion_tokens"] = max_tokens
        # the judge shares the connection, retry, timeout, cache and price settings of the model
        prices_table = PriceTable.load(prices)
        def endpoint(name: str, base_url: str | None, role: str = EVALUATED, **kw: Any) -> Any:
            return RunDir(runs).client(Role(role, name, base_url, max_connections=max_connections, prices=prices),
                                       cache=cache, max_retries=max_retries, timeout=timeout,
                                       assume_output=spending.assume_output, **kw)

        client = endpoint(model, base_url, budget_usd=budget)
        if audit_judge and judge != ORACLE:
            options.fail("--audit-judge records a model's verdicts beside the exact judge's: use it with --judge oracle")
        exact = ExactJudge(contexts=contexts) if judge == ORACLE else None
        judge_client = exact or (endpoint(judge, judge_base_url, "judge") if judge else None)
        est = estimate_grid(cells, records, built, model, prices_table, questions=qs, params=params,
                            max_tokens=max_tokens, assume_output=spending.assume_output)
        if judge_client is not None and exact is None:  # the exact judge makes no call
            est = est + estimate_grid_grading(cells, records, built, model, judge_client, questions=qs, params=params,
                                              answer_tokens=max_tokens or spending.assume_output)
        if spending.dry_run:
            rows = grid_rows(cells, records, built, qs, model, params)
            for r in rows:
                typer.echo(f"{r['run']:<60} {r['questions']:>5} questions {r['to_answer']:>5} to answer "
                           f"{r['calls']:>6} calls")
            total = sum(r["calls"] for r in rows)
            typer.echo(f"{len(rows)} runs, {sum(r['to_answer'] for r in rows)} answers to make, {total} model calls "
                       f"(re-asks of unreadable replies not counted; cached calls send nothing)")
        if not spending.proceed(est, budget, ledger=grid_ledger(runs)):
            return
        options.say_roles({"evaluated": client, "judge": judge_client,
                           "audit judge": (audit_judge, judge_base_url) if audit_judge else None,
                           "rerank scorer": (scorer, rerank_base_url) if "rerank" in method_names else None})
        ungraded = 0
        # one ledger and one budget for the model and the judge, over every invocation on RUNS
        with ledger_for([client, judge_client], grid_ledger(runs)):
            summary = run_ctrl(records, qs, runs, client, built, cond_names, params=params,
                               all_methods_on_gold=all_on_gold, progress=progress,
                               run_config={"contexts": str(contexts)})
            options.err.print(summary.describe(), highlight=False)
            if judge_client is not None:
                from trek.grading import run_grading

                for rd in summary.runs:
                    rep = run_grading(rd, judge_client, progress=False, **dict(j.params))
                    options.err.print(f"{rd.name}: {rep.describe().splitlines()[0]}", highlight=False)
                    ungraded += rep.pending_grades + rep.failed_grades
                    if audit_judge:
                        from trek.audit import audit_grading

                        arep = audit_grading(rd, endpoint(audit_judge, a.base_url, "audit-judge"),
                                             progress=False, **dict(a.params))
                        options.err.print(f"{rd.name}: {arep.describe().splitlines()[0]}", highlight=False)
    if ungraded:
        options.err.print(f"{ungraded} grade(s) pending or failed: run the same command again to retry them.",
                          highlight=False)
    if summary.pending or summary.failed:
        for line in summary.errors[:5]:
            options.err.print(f"  {line}", highlight=False)
        options.err.print(f"{summary.pending} answers pending, {summary.failed} failed: run the same command again "
                          "to retry them.", highlight=False)
        raise typer.Exit(3)
    if ungraded:
        raise typer.Exit(3)
