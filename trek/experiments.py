"""Every experiment of the paper on the bundled benchmark with the embedded model (``make runs``).

    trek experiments [--out data/runs] [--work build/experiments] [--replay-only] [--fresh]

:func:`run_experiments` runs the whole method on TrekBench-Mini with SmolLM2-135M served by
llama.cpp (:mod:`trek.local`) as the evaluated model *and* as every judge:

1. **Wild**: three systems answer all questions (no search; search-then-read and agentic search
   over the local BM25 index of Mini's pages); every run is graded with its dataset's protocol.
2. **TrekTrace**: the failures of the two search runs are attributed. With the exact judge and
   the embedded model judging beside it, a stand-in human review is written too: the exact
   judge's labels of a random third of the agentic run's traced cases
   (``wild/agentic/review-sample-exact.csv``, as ``trek trace review --sample --prefill`` writes
   it), and the README shows the embedded judge's label shares corrected by it. Each traced run
   is then verified (``trek trace verify``: ``verify.jsonl`` beside ``trace.jsonl``).
3. **Ctrl**: contexts are built from Mini (its 20 outdated and 10 relevance pages per question,
   republications, exact fabrications of the annotated answer spans, every page then cut to a
   short passage); every baseline runs on every condition and ablation, and every run is graded.
   The Direct runs that ``Settings.ctrl_trace_runs`` names are traced and verified too (their
   pages read from the contexts, :mod:`trek.trace.ctrl`); there the injected distractors are the
   ground truth the minimal distracting sets are held against.

The output folder (default ``data/runs``, committed) holds only text::

    OUT/README.md                     what was run, with which settings, and what came out
    OUT/wild/<system>/                run.json, questions/answers/grades/trace/verify .jsonl
    OUT/wild/agentic/review-sample-exact.csv   the stand-in review (exact judge, oracle settings)
    OUT/ctrl/build/                   pools.jsonl, contexts.jsonl, build.json
    OUT/ctrl/runs/<model>__<method>__<condition>/
    OUT/replay.jsonl.gz               every model reply the results needed (the replay log)
    OUT/MANIFEST.txt                  the files above, one per line: what a later run may replace

**Replay.** Replies are cached in ``WORK/llm-cache.sqlite``; the replay log is loaded into it
first, so an unchanged experiment makes no model call and never starts llama.cpp, and a changed
prompt calls the model only for the requests it changed. The results are always written by a
pass in which every reply came from the cache (when a pass had to call the model, the stages run
once more from the cache), with time stamps fixed through ``SOURCE_DATE_EPOCH``: replaying gives
the same bytes. The replay log is then rewritten with exactly the replies that pass read. The
output folder is replaced only when everything finished (nothing pending or failed).

**The output folder.** Only what an earlier ``trek experiments`` wrote there (listed in its
``MANIFEST.txt``) is replaced; any other file in the folder is kept. A folder that is not empty
and has no manifest was not made by this command: it is refused before any work starts, as is an
``--out`` that is a file or overlaps ``--work``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trek import runs
from trek.ctrl import conditions as cond
from trek.llm.cache import LLMCache
from trek.llm.client import FatalLLMError, LLMClient
from trek.local import LOCAL_MODEL, LocalModelUnavailable
from trek.outputs import staged_folder

__all__ = ["Settings", "ExperimentsError", "StageStats", "Report", "run_experiments", "WILD_SYSTEMS", "BENCHMARK"]

BENCHMARK = "TrekBench-Mini"
REPLAY = "replay.jsonl.gz"
#: The list of files ``trek experiments`` wrote into its output folder (the only ones it replaces).
MANIFEST = "MANIFEST.txt"
_MANIFEST_HEAD = "# files written by `trek experiments`; a later run replaces these and keeps every other file\n"
#: Fixed time stamp of every record in the recorded runs (2026-12-01T00:00:00Z).
RECORDED_EPOCH = 1796083200
#: The Wild systems, in table order: the local BM25 index over Mini's pages for the two that search.
WILD_SYSTEMS = ("no-search", "search-then-read", "agentic")
_TEXT_SUFFIXES = (".json", ".jsonl", ".md", ".gz", ".csv")


class ExperimentsError(RuntimeError):
    """A stage could not finish (a call not in the replay log without a model, pending work)."""


@dataclass(frozen=True)
class Settings:
    """What the recorded runs use; every field is recorded in ``OUT/README.md``.

    The embedded model reads about 100-150 prompt tokens a second on 2 cores, so the defaults keep
    every prompt short: pages and passages are cut (Ctrl documents to ``ctrl_doc_chars``, so the
    paper's distractor budgets fit), and Ctrl uses ``ctrl_questions`` of Mini's questions (the
    first of each source style in turn). Sampling is greedy (``temperature`` 0) for every role.
    """

    model: str = LOCAL_MODEL
    #: Sent with every call of every role.
    params: dict[str, Any] = field(default_factory=lambda: {"temperature": 0.0, "max_tokens": 320})
    #: Per Wild system, keywords of :func:`trek.answering.runner.system_config` (pages cut to 600 characters;
    #: the agentic system must search on its first round: the 135M model otherwise never does).
    systems: dict[str, dict[str, Any]] = field(default_factory=lambda: {
        "no-search": {},
        "search-then-read": {"top_k": 2, "page_chars": 600},
        "agentic": {"max_rounds": 2, "results_per_search": 3, "page_chars": 600, "first_search": True},
    })
    #: Questions of Mini in the Wild runs (None: all; fewer for a quick trial).
    wild_questions: int | None = None
    #: Keywords of :func:`trek.trace.trace_run`: characters of each gold page and of any other page.
    trace: dict[str, Any] = field(default_factory=lambda: {"gold_chars": 700, "other_chars": 350})
    #: Re-asks of an unreadable JSON reply (a schema-constrained reply fails only by running out of tokens).
    max_reasks: int = 0
    #: Questions of Mini in Ctrl (the first of each source style in turn; each has 20 outdated and
    #: 10 relevance pages, see data/mini/timelines.yaml); every document, synthetic ones included, is
    #: cut to a passage of ``ctrl_doc_chars`` characters after republication and fabrication.
    ctrl_questions: int | None = 12
    ctrl_doc_chars: int = 160
    #: The paper's budgets: OO 20, MND 10 + 10, SAA 10 + 5 republications + 5 fabrications.
    ctrl_budgets: cond.Budgets = field(default_factory=cond.Budgets)
    #: How fabrications are made (:data:`trek.ctrl.fabrication.FABRICATORS`): ``exact`` edits Mini's
    #: annotated answer spans without a model.
    fabricator: str = "exact"
    #: Where Ctrl contexts show source URLs: ``cued`` (the paper: only the domain-cued SAA
    #: conditions) or ``all`` (every condition but SBA).
    ctrl_show_urls: str = "cued"
    #: Keywords of :class:`trek.ctrl.fabrication.FabricationSettings`.
    fabrication: dict[str, Any] = field(default_factory=lambda: {"target": 5})
    #: Keywords per baseline (:func:`trek.rag.make_method`): Structured answers in schema-constrained JSON.
    method_settings: dict[str, dict[str, Any]] = field(default_factory=lambda: {"structured": {"json_answer": True}})
    #: The baselines on the main conditions (Gold-only is Direct on GOLD), and Direct on every ablation.
    ctrl_methods: tuple[str, ...] = ("direct", "rerank", "filter", "structured")
    ctrl_conditions: tuple[str, ...] = cond.MAIN_CONDITIONS
    ctrl_ablations: tuple[str, ...] = cond.ABLATIONS
    #: Who plays every judge role: ``oracle`` (the exact judge, from Mini's annotations) or ``model``
    #: (the evaluated model itself, the paper's setup with one small model in every role).
    judge: str = "oracle"
    #: With the exact judge: the model judging alongside it (trek.audit), at most this many grading
    #: verdicts (Wild runs first, then Ctrl, in run order) and this many traced cases (None: all; 0: none).
    audit_grading: int | None = 150
    audit_trace_cases: int | None = None
    #: ``trek trace verify`` on every traced run (Wild, and the Ctrl runs of ``ctrl_trace_runs``), with
    #: the judges of the trace; a distractor search stops, inconclusive, after ``verify_max_probes`` probes
    #: (8: the re-run, the gold pages alone, the binary split over a Ctrl context's 20 noise pages and its
    #: check; delta debugging past that would cost the embedded model dozens of long prompts a case).
    verify: bool = True
    verify_max_probes: int | None = 8
    #: Ctrl runs traced and verified (``method:condition``; TrekTrace reads the pages from the
    #: contexts, so only methods that show the whole context: direct). The injected distractors are
    #: the ground truth a minimal distracting set is checked against. One run by default: SAA, whose
    #: contexts mix three kinds of distractor (natural, fabricated, republished); each traced case costs
    #: the embedded model a long gold-plus-noise prompt (about a minute on 2 loaded cores).
    ctrl_trace_runs: tuple[str, ...] = ("direct:SAA",)

    def describe(self) -> dict[str, Any]:
        out = asdict(self)
        if self.judge == "model":  # the judge settings appear once they matter (recordings before them keep their bytes)
            for k in ("judge", "audit_grading", "audit_trace_cases"):
                out.pop(k)
        out["ctrl_budgets"] = asdict(self.ctrl_budgets)
        for k in ("ctrl_conditions", "ctrl_ablations", "ctrl_methods", "ctrl_trace_runs"):
            out[k] = list(out[k])
        return out


@dataclass
class StageStats:
    name: str
    calls: int = 0
    hits: int = 0
    seconds: float = 0.0

    def line(self) -> str:
        return f"{self.name:<34} {self.calls:>6} model calls {self.hits:>6} from the cache  {self.seconds:7.1f} s"


@dataclass
class Report:
    out: Path
    stages: list[StageStats]
    passes: int
    replies: int
    seconds: float

    @property
    def calls(self) -> int:
        """Model calls of the first pass (the only one that may call the model)."""
        return sum(s.calls for s in self.stages)

    def summary(self) -> str:
        """The closing line (the stage lines were printed as each stage finished)."""
        return (f"{self.calls} model calls, {self.passes} pass(es), {self.replies} replies in the replay log, "
                f"{self.seconds:.1f} s; results in {self.out}")

    def describe(self) -> str:
        """Every stage line of the first pass, then :meth:`summary`."""
        return "\n".join([*(s.line() for s in self.stages), self.summary()])


@contextlib.contextmanager
def _fixed_clock() -> Iterator[None]:
    old = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = str(RECORDED_EPOCH)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("SOURCE_DATE_EPOCH", None)
        else:
            os.environ["SOURCE_DATE_EPOCH"] = old


def _refuse_model() -> Any:
    raise LocalModelUnavailable("replay only: the replay log holds no reply for this request")


def question_ids_by_style(questions: Sequence[Any], n: int | None) -> list[str]:
    """The first ``n`` question ids taking each source style in turn (all when ``n`` is None)."""
    if n is None or n >= len(questions):
        return [q.id for q in questions]
    by_style: dict[str, list[str]] = {}
    for q in questions:
        by_style.setdefault(q.metadata.get("style") or q.dataset, []).append(q.id)
    chosen: list[str] = []
    queues = list(by_style.values())
    while len(chosen) < n and any(queues):
        for queue in queues:
            if queue and len(chosen) < n:
                chosen.append(queue.pop(0))
    order = {q.id: i for i, q in enumerate(questions)}
    return sorted(chosen, key=order.__getitem__)


class _Stages:
    """One pass over every stage into ``root``, counting calls per stage."""

    def __init__(self, root: Path, client: LLMClient, settings: Settings, progress: bool,
                 echo: Callable[[str], None]):
        self.root, self.client, self.s, self.progress, self.echo = root, client, settings, progress, echo
        self.stats: list[StageStats] = []

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        c0, h0, t0 = self.client.http_calls, self.client.cache_hits, time.monotonic()
        try:
            yield
        except FatalLLMError as e:
            raise ExperimentsError(f"{name}: {e}") from None
        st = StageStats(name, self.client.http_calls - c0, self.client.cache_hits - h0, time.monotonic() - t0)
        self.stats.append(st)
        self.echo(st.line())

    def judge_params(self) -> dict[str, Any]:
        return {k: v for k, v in self.s.params.items() if k != "max_tokens"}

    def grade(self, run_dir: Path) -> None:
        from trek.grading import run_grading

        judge = self.exact_judge() or self.client
        rep = run_grading(run_dir, judge, progress=self.progress, **self.judge_params())
        if rep.pending_answers or rep.pending_grades:
            raise ExperimentsError(f"grading {run_dir.name}: {rep.describe()}")
        self.audit_grades(run_dir)

    # -- the exact judge and the model judging beside it (trek.exact, trek.audit) --------------------------
    def exact_judge(self) -> Any:
        """The exact judge when the settings say so (a new one per run: it loads that run's annotations)."""
        from trek.roles import Role, make_judge

        judge = make_judge(Role("judge", self.s.judge), lambda role: None)  # "model": the evaluated model judges
        if judge is None and self.s.judge != "model":
            raise ExperimentsError(f"Settings.judge must be 'oracle' or 'model', not {self.s.judge!r}")
        return judge

    def audit_grades(self, run_dir: Path) -> None:
        """The model's grades beside the exact ones, while the grading audit's share lasts."""
        from trek.audit import audit_grading

        if self.s.judge == "model":  # no exact verdicts to audit
            return
        left = self.s.audit_grading if self.s.audit_grading is not None else None
        if left is not None:
            left -= getattr(self, "_audited", 0)
            if left <= 0:
                return
        rep = audit_grading(run_dir, self.client, limit=left, progress=self.progress, **self.judge_params())
        self._audited = getattr(self, "_audited", 0) + len(rep.grades)
        if rep.pending:
            raise ExperimentsError(f"audit of {run_dir.name}: {rep.describe()}")

    def trace_judges(self, role: Callable[[str], Any]) -> dict[str, Any]:
        """``trace_run`` keywords: the judge roles (exact, or the model) and the audit beside them."""
        from trek.trace import RoleModel

        exact = self.exact_judge()
        if exact is None:
            return {"diagnostic": role("diagnostic"), "analysis": role("analysis")}
        out: dict[str, Any] = {"diagnostic": RoleModel("diagnostic", exact, exact.model),
                               "analysis": RoleModel("analysis", exact, exact.model)}
        if self.s.audit_trace_cases != 0:
            out["audit"] = {"diagnostic": role("diagnostic"), "analysis": role("analysis")}
            out["audit_cases"] = self.s.audit_trace_cases
        return out

    def wild(self, bench: Any) -> list[Path]:
        from trek.answering.runner import run_system
        from trek.pages import PageStore
        from trek.search import make_backend

        s = self.s
        out = []
        wanted = set(question_ids_by_style(bench.questions, s.wild_questions))
        questions = [q for q in bench.questions if q.id in wanted]
        for order, label in enumerate(WILD_SYSTEMS):
            run_dir = self.root / "wild" / label
            with self.stage(f"wild {label}"), contextlib.closing(PageStore(None)) as store:
                store.add_documents(bench.corpus)
                backend = None if label == "no-search" else make_backend("local", store=store, cache=None)
                summary = run_system(
                    questions, run_dir, self.client, backend, system="agentic" if backend is None else label,
                    progress=self.progress, store=store, max_concurrent_questions=1,
                    run_config={"order": order, "label": label, "benchmark": BENCHMARK},
                    params=dict(s.params), **s.systems.get(label, {}),
                )
                if summary.pending or summary.failed:
                    raise ExperimentsError(f"wild {label}: {summary.pending} pending, {summary.failed} failed: "
                                           + "; ".join(summary.errors[:3]))
                self.grade(run_dir)
            out.append(run_dir)
        return out

    def trace(self, bench: Any, run_dirs: Sequence[Path]) -> None:
        from trek.pages import PageStore
        from trek.trace import RoleModel, trace_run

        s = self.s
        for run_dir in run_dirs:
            if runs.read_meta(run_dir).config.get("system", {}).get("system") == "no-search":
                continue
            with self.stage(f"trace {run_dir.name}"), contextlib.closing(PageStore(None)) as store:
                store.add_documents(bench.corpus)

                def role(name: str) -> RoleModel:
                    return RoleModel(name, self.client, self.client.model or "", dict(s.params), s.max_reasks)

                report = trace_run(run_dir, **self.trace_judges(role),
                                   evaluated=role("evaluated"), store=store, max_concurrent_cases=1,
                                   progress=self.progress, **s.trace)
                if report.pending:
                    raise ExperimentsError(f"trace {run_dir.name}: {report.pending} case(s) pending")
            if s.verify:
                with self.stage(f"verify {run_dir.name}"), contextlib.closing(PageStore(None)) as store:
                    store.add_documents(bench.corpus)
                    self.verify_run(run_dir, store)

    def role(self, name: str) -> Any:
        from trek.trace import RoleModel

        return RoleModel(name, self.client, self.client.model or "", dict(self.s.params), self.s.max_reasks)

    def verify_run(self, run_dir: Path, store: Any) -> None:
        """``trek trace verify`` on a traced run: the trace's judges (no audit beside them), the run's model."""
        from trek.stage import synchronous
        from trek.trace.verify import averify_run

        verify = synchronous(averify_run, close=("diagnostic", "analysis", "evaluated"))  # as trace_run closes them
        judges = {k: v for k, v in self.trace_judges(self.role).items() if k in ("diagnostic", "analysis")}
        report = verify(run_dir, **judges, evaluated=self.role("evaluated"), store=store,
                        max_probes=self.s.verify_max_probes, max_concurrent=1, progress=self.progress, **self.s.trace)
        st = report.statuses
        if st["pending"] or st["failed"]:
            raise ExperimentsError(f"verify {run_dir.name}: {st['pending']} pending, {st['failed']} failed "
                                   "experiment(s)")

    def ctrl_trace(self, run_dirs: Sequence[Path]) -> None:
        """Trace, then verify, the Ctrl runs ``Settings.ctrl_trace_runs`` names (pages from the contexts)."""
        from trek.trace import trace_run
        from trek.trace.ctrl import trace_store

        wanted = set(self.s.ctrl_trace_runs)
        chosen = []
        for run_dir in run_dirs:
            config = runs.read_meta(run_dir).config
            if f"{config.get('method')}:{config.get('condition')}" in wanted:
                chosen.append(run_dir)
        for run_dir in chosen:
            with self.stage(f"trace ctrl {run_dir.name.split('__', 1)[-1]}"), \
                    contextlib.closing(trace_store(run_dir)) as store:
                judges = {k: v for k, v in self.trace_judges(self.role).items() if k in ("diagnostic", "analysis")}
                report = trace_run(run_dir, **judges, evaluated=self.role("evaluated"), store=store,
                                   max_concurrent_cases=1, progress=self.progress, **self.s.trace)
                if report.pending:
                    raise ExperimentsError(f"trace {run_dir.name}: {report.pending} case(s) pending")
            if self.s.verify:
                with self.stage(f"verify ctrl {run_dir.name.split('__', 1)[-1]}"), \
                        contextlib.closing(trace_store(run_dir)) as store:
                    self.verify_run(run_dir, store)

    def ctrl(self) -> None:
        from trek.contexts import read_contexts
        from trek.ctrl.build import CONTEXTS_FILE, build
        from trek.ctrl.fabrication import FabricationSettings
        from trek.ctrl.pools import from_mini
        from trek.datasets import load_questions
        from trek.rag import make_method
        from trek.rag.runner import run_ctrl

        s = self.s
        build_dir = self.root / "ctrl" / "build"
        with self.stage("ctrl build (fabrication)"):
            ids = question_ids_by_style(load_questions("mini"), s.ctrl_questions)
            fab = FabricationSettings(**{"chat_params": dict(s.params), "max_reasks": s.max_reasks, **s.fabrication})
            result = build(from_mini(question_ids=ids), build_dir, client=self.client, embedder="wordllama",
                           conditions=(*s.ctrl_conditions, *s.ctrl_ablations), budgets=s.ctrl_budgets,
                           fabrication_settings=fab, fabricator=s.fabricator, doc_chars=s.ctrl_doc_chars,
                           source="mini", show_urls=s.ctrl_show_urls)
            pending = [p.question.id for p in result.pools if p.notes.get("fabrication", {}).get("pending")]
            if pending:
                raise ExperimentsError(f"ctrl build: fabrication pending for {pending[:5]}")
        contexts = read_contexts(build_dir / CONTEXTS_FILE, check_rendering=True)
        questions = {p.question.id: p.question for p in result.pools}
        methods = {m: make_method(m, **({"max_reasks": s.max_reasks} if m in ("filter", "structured") else {}),
                                  **s.method_settings.get(m, {}))
                   for m in s.ctrl_methods}
        grid = [("ctrl runs (baselines)", methods, s.ctrl_conditions),
                ("ctrl runs (ablations, direct)", {"direct": methods.get("direct") or make_method("direct")},
                 s.ctrl_ablations)]
        run_dirs: list[Path] = []
        for name, chosen, conditions in grid:
            if not conditions:
                continue
            with self.stage(name):
                summary = run_ctrl(contexts, questions, self.root / "ctrl" / "runs", self.client, chosen,
                                   list(conditions), params=dict(s.params), progress=self.progress,
                                   run_config={"contexts": f"ctrl/build/{CONTEXTS_FILE}", "benchmark": BENCHMARK})
                if summary.pending or summary.failed:
                    raise ExperimentsError(f"{name}: {summary.pending} pending, {summary.failed} failed: "
                                           + "; ".join(summary.errors[:3]))
            run_dirs += summary.runs
        with self.stage("ctrl grading"):
            for run_dir in run_dirs:
                self.grade(run_dir)
        self.ctrl_trace(run_dirs)

    def all(self) -> None:
        from trek.datasets import load_benchmark

        bench = load_benchmark("mini")
        wild = self.wild(bench)
        self.trace(bench, wild)
        self.ctrl()


SUMMARY_INTRO = """\
# Recorded runs: {model} on {benchmark}

Written by `make runs` (`trek experiments`); do not edit by hand. {judges}

`replay.jsonl.gz` holds the {replies} model replies these files needed; `make runs` replays them
without a model and writes these files again byte for byte.

## Settings

```
{settings}
```
"""


def write_summary(root: Path, settings: Settings, replies: int) -> Path:
    """``root/README.md``: the settings and the main numbers of the recorded runs in ``root``."""
    import json

    import pandas as pd

    from trek.analysis import accuracy_by_run, judge_check
    from trek.audit import show_kappa
    from trek.report import ctrl as ctrl_reports
    from trek.report.trace import label_shares

    wild = {label: root / "wild" / label for label in WILD_SYSTEMS}
    model = runs.read_meta(next(iter(wild.values()))).model
    text = SUMMARY_INTRO.format(model=model, benchmark=BENCHMARK, replies=replies, judges=_judges_text(settings),
                                settings=json.dumps(settings.describe(), indent=2, sort_keys=True))
    with pd.option_context("display.width", 200, "display.max_columns", 50):
        acc = accuracy_by_run(wild, datasets=["freshqa", "infodeepseek", "sealqa"]).round(1)
        text += "\n## Wild: accuracy (%) over all questions\n\n```\n" + acc.to_string() + "\n```\n"
        check = show_kappa(judge_check(wild).round({"judged_correct": 1, "mentions_answer": 1, "agreement": 1}))
        text += ("\n## Wild: the judge against a plain answer-mention check\n\n"
                 "Share of graded answers the judge called correct, share that name an acceptable answer as\n"
                 "whole words (`trek.analysis.mentions_answer`), their agreement and Cohen's kappa (undefined\n"
                 "where both give one verdict to every answer: chance agreement is then 1 and kappa 0/0):\n\n```\n"
                 + check.to_string() + "\n```\n")
        traced = {k: v for k, v in wild.items() if (v / runs.TRACE).exists()}
        if traced:
            text += "\n## TrekTrace: share of failures per label (%)\n\n```\n" + label_shares(traced).to_string() + "\n```\n"
            text += _trace_notes(traced)
        ctrl_dir = root / "ctrl" / "runs"
        if ctrl_dir.is_dir():
            df = ctrl_reports.load_ctrl(ctrl_dir.resolve())
            table = df.pivot_table(index="method", columns="condition", values="correct", aggfunc="mean") * 100
            cols = [c for c in cond.ALL_CONDITIONS if c in table.columns]
            text += ("\n## Ctrl: accuracy (%) per method and condition\n\n```\n"
                     + table[cols].T.round(1).to_string() + "\n```\n")
            which = df[["run", "method", "condition"]].drop_duplicates().set_index("run")
            check = judge_check({r: ctrl_dir / r for r in which.index}).join(which)
            named = check.pivot_table(index="method", columns="condition", values="mentions_answer")
            text += ("\n## Ctrl: share of answers that name an acceptable answer (%)\n\n"
                     "The same whole-word check as above, judge-free:\n\n```\n"
                     + named.reindex(columns=cols).T.round(1).to_string() + "\n```\n")
    text += _undecided_section(root)
    text += _verify_section(root)
    if settings.judge != "model":  # the exact judge decided: the audit says how the model judged beside it
        text += _audit_section(root)
        text += _review_section(root)
    path = root / "README.md"
    path.write_text(text, encoding="utf-8")
    return path


def undecided_counts(root: Path) -> list[tuple[str, str, int, int]]:
    """``(where, what, undecided, of)``: the grades and TrekTrace judge steps of the recorded runs
    under ``root`` that their judge left undecided, per stage (Wild grades, Ctrl grades, TrekTrace
    steps by name), read from the records."""
    from collections import Counter

    from trek.trace.pipeline import load_trace
    from trek.types import Grade, iter_jsonl

    rows: list[tuple[str, str, int, int]] = []
    for where, folder in (("Wild", root / "wild"), ("Ctrl", root / "ctrl" / "runs")):
        und = total = 0
        for grades in sorted(folder.glob(f"*/{runs.GRADES}")) if folder.is_dir() else []:
            for g in iter_jsonl(grades, Grade):
                total += 1
                und += g.outcome == "undecided"
        if total:
            rows.append((where, "grades", und, total))
    steps: Counter[str] = Counter()
    undecided: Counter[str] = Counter()
    for trace in sorted((root / "wild").glob(f"*/{runs.TRACE}")) if (root / "wild").is_dir() else []:
        for rec in load_trace(trace.parent):
            for st in rec.steps:
                if st.role != "evaluated":
                    steps[st.name] += 1
                    undecided[st.name] += st.status == "undecided"
    rows += [("TrekTrace", f"{name} steps", undecided[name], steps[name]) for name in sorted(steps)]
    return rows


def _undecided_section(root: Path) -> str:
    rows = undecided_counts(root)
    if not rows:
        return ""
    width = max(len(f"{w} {what}") for w, what, _, _ in rows)
    lines = [f"{(w + ' ' + what).ljust(width)}  {u:>5} of {n:>5}" for w, what, u, n in rows]
    total_u, total_n = sum(r[2] for r in rows), sum(r[3] for r in rows)
    return ("\n## Verdicts the judge left undecided\n\n"
            "The exact judge abstains where its rules cannot be sure (a value no annotation covers, a long or\n"
            "hedged answer, a format it cannot read). An undecided grade is neither correct nor incorrect\n"
            "(accuracy tables show it as its own column); an undecided TrekTrace step leaves its test not run\n"
            f"and the case incomplete, so no label comes from it. In all: {total_u} of {total_n} verdicts.\n\n"
            "```\n" + "\n".join(lines) + "\n```\n")


def _ctrl_name(rd: Path) -> str:
    """``ctrl/<method>__<condition>`` of a Ctrl run directory (its name without the model, which is one)."""
    return "ctrl/" + rd.name.split("__", 1)[-1]


def verification_rows(root: Path) -> list[dict[str, Any]]:
    """Per verified run under ``root`` (``wild/*``, ``ctrl/runs/*``) and label tested: the rows of
    :meth:`trek.trace.verify.VerifyReport.rows` (confirmed k of n with the Wilson interval, refuted,
    inconclusive and skipped counts, refuted cases), each with its ``run`` (``wild/agentic``,
    ``ctrl/direct__OO``...)."""
    from trek.trace.verify import VerifyReport, load_verify

    out = []
    for d in sorted(root.glob(f"wild/*/{runs.VERIFY}")) + sorted(root.glob(f"ctrl/runs/*/{runs.VERIFY}")):
        rd = d.parent
        name = f"wild/{rd.name}" if rd.parent.name == "wild" else _ctrl_name(rd)
        for row in VerifyReport(d, records=load_verify(rd)).rows():
            out.append({"run": name, **row})
    return out


def injected_sets(root: Path) -> list[dict[str, Any]]:
    """Per verified Ctrl run under ``root``: the distractor searches ``confirmed`` with a minimal
    set, how many of those sets hold an injected Ctrl page (a page with a Ctrl kind), and how
    often each kind appears in them, beside each kind's share of the searched noise pages."""
    from collections import Counter

    from trek.trace.pipeline import load_trace
    from trek.trace.verify import _ctrl_kinds, load_verify

    out = []
    for d in sorted(root.glob(f"ctrl/runs/*/{runs.VERIFY}")):
        rd = d.parent
        recs = [r for r in load_verify(rd) if r.experiment == "distractor_search" and r.status == "done"]
        if not recs:
            continue
        confirmed = [r for r in recs if r.verdict == "confirmed" and r.minimal_set]
        in_sets: Counter[str] = Counter(p.ctrl_kind or "not injected" for r in confirmed for p in r.minimal_set)
        kind = _ctrl_kinds(rd)
        trace = {t.question_id: t for t in load_trace(rd)}
        noise: Counter[str] = Counter()
        for r in recs:
            t = trace.get(r.question_id)
            if t is None or r.noise_pages is None:
                continue
            kept = {*t.gold_urls, *t.equivalent_urls}
            noise.update((kind(u) if kind else None) or "not injected" for u in (t.noise_context or []) if u not in kept)
        out.append({"run": _ctrl_name(rd), "searches": len(recs), "confirmed": len(confirmed),
                    "injected": sum(any(p.ctrl_kind for p in r.minimal_set) for r in confirmed),
                    "kinds": dict(sorted(in_sets.items())), "noise_kinds": dict(sorted(noise.items()))})
    return out


def _verify_section(root: Path) -> str:
    """The README section of ``trek trace verify`` on the recorded runs, computed from verify.jsonl."""
    import pandas as pd

    rows = verification_rows(root)
    if not rows:
        return ""

    def share(r: dict[str, Any]) -> str:
        return f"{r['confirmed']}/{r['n']} ({100 * r['share']:.1f}%)" if r["n"] else "0/0"

    table = pd.DataFrame({
        "run": [r["run"] for r in rows], "label": [r["label"] for r in rows],
        "confirmed": [share(r) for r in rows],
        "95% CI": [f"{100 * r['low']:.1f}-{100 * r['high']:.1f}" if r["n"] else "-" for r in rows],
        "refuted": [r["refuted"] for r in rows], "inconclusive": [r["inconclusive"] for r in rows],
        "skipped": [r["skipped"] for r in rows],
        "refuted cases": [", ".join(r["refuted_cases"]) or "-" for r in rows]})
    text = ("\n## TrekTrace verification\n\n"
            "`trek trace verify` on every traced run, with the trace's judges: a distractor search for each case\n"
            "labelled Distraction (the gold-plus-noise probe asked again with subsets of its noise pages), a\n"
            "query repair for each labelled Pre-retrieval or Retrieval (the judge's adequate queries searched\n"
            "again on the local index). Per run and label: the tested cases the experiment confirmed, k/n with\n"
            "a 95% Wilson interval, and the cases it refuted (skipped cases are not tested and not counted);\n"
            "the labels themselves are unchanged:\n\n```\n" + table.to_string(index=False) + "\n```\n")
    ctrl = injected_sets(root)
    if ctrl:
        def kinds(d: dict[str, int]) -> str:
            return ", ".join(f"{k} {v}" for k, v in d.items()) or "-"

        t = pd.DataFrame({
            "run": [c["run"] for c in ctrl], "searches": [c["searches"] for c in ctrl],
            "confirmed sets": [c["confirmed"] for c in ctrl],
            "hold an injected page": [f"{c['injected']}/{c['confirmed']} ({100 * c['injected'] / c['confirmed']:.1f}%)"
                                      if c["confirmed"] else "0/0" for c in ctrl],
            "pages in the sets": [kinds(c["kinds"]) for c in ctrl],
            "noise pages searched": [kinds(c["noise_kinds"]) for c in ctrl]})
        text += ("\nIn Ctrl the injected distractors are known. Per traced Ctrl run: the distractor searches, those\n"
                 "confirmed with a 1-minimal distracting set, how many of these sets hold an injected page, and the\n"
                 "kinds of the pages in the sets beside the kinds of all the noise pages searched (every page of a\n"
                 "Ctrl context but the gold ones is injected, so the kinds say which distractors did the work):\n\n"
                 "```\n" + t.to_string(index=False) + "\n```\n")
    return text


def _trace_notes(traced: dict[str, Path]) -> str:
    """The notes under the label shares: which run's query was the question itself, what the wrong
    probe answers named, and the rank diagnostic beside the query verdict."""
    from trek.report import trace as trace_reports

    text = ""
    note = trace_reports.query_note(traced)
    if note:
        text += f"\nQueries: {note}.\n"
    split = trace_reports.probe_answer_split(traced)
    text += ("\n### What the wrong probe answers named\n\n"
             "Interpretation comes from a wrong gold-only answer, Distraction from a wrong gold-plus-noise\n"
             "answer after a right gold-only one. Where the exact judge graded that answer: `competing` names\n"
             "an annotated wrong answer (an older value, a neighbour's, a fabrication), `unannotated` names\n"
             "something no page states, `no answer` declines or says nothing:\n\n```\n"
             + split.to_string() + "\n```\n")
    sweep = trace_reports.query_rank_sweep(traced)
    text += ("\n### Query adequacy and the rank diagnostic\n\n"
             "`adequate`: % of the cases whose query test ran that the plausibility rule (appendix C.2,\n"
             "`trek.query_targets`) judged adequate; it alone decides Pre-retrieval against Retrieval.\n"
             "`rank<=d`: % where a gold page is retrievable by the recorded queries at depth d on the local\n"
             "index, a diagnostic that decides nothing:\n\n```\n" + sweep.to_string() + "\n```\n")
    return text


def _written_before(out: Path) -> set[str] | None:
    """The files an earlier run installed in ``out`` (its manifest); ``None`` when ``out`` is
    missing or empty. A non-empty folder without a manifest raises :class:`ExperimentsError`."""
    if not out.is_dir() or not any(out.iterdir()):
        return None
    manifest = out / MANIFEST
    if not manifest.is_file():
        raise ExperimentsError(
            f"--out {out} is a folder that `trek experiments` did not make (it holds files and no {MANIFEST}); "
            "the results would replace it: choose an empty or new folder")
    return {ln.strip() for ln in manifest.read_text(encoding="utf-8").splitlines()
            if ln.strip() and not ln.startswith("#")}


def check_out(out: Path, work: Path) -> None:
    """Refuse an output folder the results must not go to (see the module doc), before any work."""
    from trek.outputs import check_folder_out

    try:
        check_folder_out(out)
    except ValueError as e:
        raise ExperimentsError(str(e)) from None
    o, w = out.resolve(), work.resolve()
    if o == w or o in w.parents or w in o.parents:
        raise ExperimentsError(f"--out {out} and --work {work} overlap; give them separate folders")
    _written_before(out)


def _judges_text(settings: Settings) -> str:
    """Who decided, for the summary's first paragraph."""
    if settings.judge == "model":
        return ("Every experiment of the paper\nran on the bundled fictional benchmark with the embedded model as the "
                "evaluated model and as\nevery judge. A 135M-parameter model is far too small for this task: these "
                "numbers show the method\nrunning end to end on a real model, they are **not** the paper's results. "
                "Read the judge check\nbelow before any accuracy: a judge this small calls most answers correct "
                "whatever they say.")
    return ("Every experiment of the paper\nran on the bundled fictional benchmark with the embedded model as the "
            "evaluated model, and\nevery judge role played by the **exact judge** (`--judge oracle`, a deviation "
            "from the paper's\nLLM judges): grades, evidence, query adequacy, probe verdicts and stale checks "
            "decided from\nMini's annotations, so the figures measure the model's answers, not a judge. The "
            "embedded\nmodel judged alongside on a subset; the judge audit at the end measures it against the "
            "exact\njudge. A 135M-parameter model is far too small for this task: these numbers show the method\n"
            "running end to end on a real model, they are **not** the paper's results.")


def _audit_section(root: Path) -> str:
    """The judge audit of the recorded runs (the model's verdicts against the exact judge's)."""
    import pandas as pd

    from trek.audit import audit_pairs, audit_table, show_kappa

    dirs = [d for d in sorted(root.glob("wild/*")) + sorted(root.glob("ctrl/runs/*")) if d.is_dir()]
    pairs = audit_pairs({f"{d.parent.name}/{d.name}": d for d in dirs})
    if pairs.empty:
        return ""
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        table = show_kappa(audit_table(pairs).round({"agreement_binary": 1, "agreement_outcomes": 1, "kappa_low": 2, "kappa_high": 2,
                                                     "exact_yes": 1, "judge_yes": 1}))
        return ("\n## Judge audit: the embedded model against the exact judge\n\n"
                "Per role, the verdicts both gave (`n`), agreement (%) on credit (`agreement_binary`: correct/yes or not) "
                "and on the outcome (`agreement_outcomes`: grading's up to three), Cohen's kappa with a 95% interval, the share "
                "each called correct/yes (%), the model's unreadable verdicts (`trek judge audit`) and why a kappa "
                "is undefined or has no interval (`kappa_note`): where both judges gave one verdict throughout, "
                "kappa is 0/0 (undefined); where only the model did (`judge_yes` 100 or 0), it is 0 by "
                "construction and has no interval (NaN):\n\n```\n"
                + table.to_string() + "\n```\n")


#: The stand-in review of the recording: the run, the file, its seed and stratification.
REVIEW_RUN, REVIEW_FILE, REVIEW_SEED = "agentic", "review-sample-exact.csv", 0


def _review_section(root: Path) -> str:
    """Write the stand-in review (the exact judge's labels of a random third of the agentic run's
    traced cases) and return the README section of the embedded judge's shares corrected by it."""
    import pandas as pd

    from trek.trace.pipeline import load_trace
    from trek.trace.review import write_review
    from trek.trace.shares import draw_sample, judge_labels, read_human, shares_table

    run_dir = root / "wild" / REVIEW_RUN
    records = load_trace(run_dir)
    done = [r for r in records if r.status == "done"]
    if not done or not all(r.audit_steps for r in done):
        return ""
    n = -(-len(done) // 3)
    sample = draw_sample(records, n, REVIEW_SEED, "dataset")
    path = write_review(run_dir, run_dir / REVIEW_FILE, sample=sample, prefill=True)
    human = read_human(path, records, seed=REVIEW_SEED, by="dataset")
    # the truth here is the exact judge's share among these traced cases: the traced-share estimand
    t = shares_table(records, judge_labels(records, "audit"), human, estimand="traced").set_index("label")
    truth = {lab: sum(lab in r.labels for r in done) / len(done) for lab in t.index}

    def ci(a: str, lo: str, hi: str) -> pd.Series:
        return t.apply(lambda r: f"{100 * r[a]:.1f} [{100 * r[lo]:.1f}, {100 * r[hi]:.1f}]", axis=1)

    show = pd.DataFrame({"exact (truth)": [f"{100 * truth[lab]:.1f}" for lab in t.index],
                         "embedded judge": ci("judge_share", "judge_low", "judge_high"),
                         "corrected (PPI++)": ci("corrected_share", "low", "high"),
                         "review only": ci("human_only_share", "human_low", "human_high"),
                         "lambda": t["lambda"].round(2)}, index=t.index)
    wild = f"data/runs/wild/{REVIEW_RUN}"
    return (f"\n## Judge-corrected label shares: a stand-in review of the {REVIEW_RUN} trace\n\n"
            f"On Mini the exact judge is the truth. Its labels of a random sample of {n} of the {len(done)} fully "
            f"traced cases of `{REVIEW_RUN}` (stratified by dataset, seed {REVIEW_SEED}) stand in for a human "
            f"review; the embedded model's labels (the trace its audited verdicts give, `--labels-from audit`) are the "
            f"judge's. The review file `wild/{REVIEW_RUN}/{REVIEW_FILE}` is what\n\n"
            f"    trek trace review {wild} --sample {n} --seed {REVIEW_SEED} --by dataset --prefill "
            f"--out {wild}/{REVIEW_FILE}\n\n"
            f"writes, and the shares (%, 95% intervals) are those of\n\n"
            f"    trek trace shares {wild} --labels-from audit --human {wild}/{REVIEW_FILE} --seed {REVIEW_SEED} "
            f"--sample-by dataset\n\n"
            f"beside the exact judge's share over all {len(done)} cases. Where the embedded judge carries no "
            f"information (`lambda` 0) the corrected share is the review's own:\n\n```\n"
            + show.to_string() + "\n```\n")


def _install(src: Path, out: Path) -> None:
    """Put the text files of ``src`` in ``out``: the files of the earlier run are replaced, every
    other file of ``out`` is kept (everything is assembled beside it first, then swapped in)."""
    before = _written_before(out)
    with staged_folder(out) as staging:
        written = []
        for f in sorted(src.rglob("*")):
            if f.is_file() and f.suffix in _TEXT_SUFFIXES and not f.name.startswith("."):
                rel = f.relative_to(src)
                dst = staging / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, dst)
                written.append(rel.as_posix())
        (staging / MANIFEST).write_text(_MANIFEST_HEAD + "".join(f"{r}\n" for r in written), encoding="utf-8")
        if before is not None:  # keep what the earlier run did not write
            for f in sorted(out.rglob("*")):
                rel = f.relative_to(out).as_posix()
                if f.is_dir() or rel in before or rel == MANIFEST:
                    continue
                dst = staging / rel
                if dst.exists():
                    raise ExperimentsError(f"{f} was not written by `trek experiments` but a result has its name; "
                                           "move it and run again (the replay log makes the rerun quick)")
                dst.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(f, dst)
                except OSError:
                    shutil.copy2(f, dst)


def run_experiments(
    out: str | os.PathLike[str] = "data/runs",
    *,
    work: str | os.PathLike[str] = "build/experiments",
    replay: str | os.PathLike[str] | None = None,
    replay_only: bool = False,
    fresh: bool = False,
    settings: Settings | None = None,
    server: Callable[[], Any] | None = None,
    progress: bool = True,
    echo: Callable[[str], None] = print,
) -> Report:
    """Run every stage (see the module docstring) and install the results in ``out``.

    ``replay`` (default ``OUT/replay.jsonl.gz``, when it exists) is loaded into the work cache
    first. ``replay_only`` never starts the model: a request without a recorded reply raises
    :class:`ExperimentsError`. ``fresh`` empties the work cache first (so only the replay log
    answers). ``server`` starts the model's server on the first request the cache cannot answer
    (default :func:`trek.local.shared_server`; anything with a ``base_url`` speaking the OpenAI
    API will do). Returns a :class:`Report` with the calls and time per stage.
    """
    s = settings or Settings()
    out_dir, work_dir = Path(out), Path(work)
    check_out(out_dir, work_dir)
    replay_path = Path(replay) if replay is not None else out_dir / REPLAY
    work_dir.mkdir(parents=True, exist_ok=True)
    cache_path = work_dir / runs.LLM_CACHE
    if fresh:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{cache_path}{suffix}").unlink(missing_ok=True)
    t0 = time.monotonic()
    if replay_path.exists():
        seed = LLMCache(cache_path)
        added = seed.load(replay_path)
        seed.close()
        echo(f"replay log {replay_path}: {added} replies added to {cache_path}")
    elif replay is not None:
        raise ExperimentsError(f"replay log {replay_path} does not exist")
    first: list[StageStats] | None = None
    with _fixed_clock():
        for n in range(2):
            root = work_dir / f"pass-{n}"
            if root.exists():
                shutil.rmtree(root)
            cache = LLMCache(cache_path, track=True)  # the replay log keeps the keys this pass used
            starter = _refuse_model if (replay_only or n > 0) else server
            client = LLMClient(s.model, cache=cache, progress=False, local_server=starter)
            echo(f"pass {n + 1}: " + ("replaying from the cache" if starter is _refuse_model
                                      else "calling the model where needed"))
            stages = _Stages(root, client, s, progress, echo)
            try:
                stages.all()
            except ExperimentsError:
                cache.close()
                raise
            first = first if first is not None else stages.stats
            if sum(st.calls for st in stages.stats) == 0:
                break
            cache.close()
        replies = cache.dump(root / REPLAY, cache.touched)
        cache.close()
        write_summary(root, s, replies)
    _install(root, out_dir)
    return Report(out_dir, first or [], n + 1, replies, time.monotonic() - t0)
