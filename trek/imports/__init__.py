"""Importers: other agents' logs as Trek run directories (``trek import``).

:func:`import_run` reads the input files of one format, matches their records to questions,
turns each record into a :class:`~trek.types.Trajectory` of the documented trajectory schema
(:mod:`trek.imports.schema`) with its ``source`` and observed ``coverage``, stores the page text
the log carries in ``pages.sqlite``, and writes the run directory at once (``questions.jsonl``,
``answers.jsonl``, ``run.json`` with kind ``import``), so ``trek grade`` and ``trek trace`` work
on it unchanged. Formats (one module each):

* ``openai-responses`` (:mod:`trek.imports.openai_responses`)
* ``anthropic-messages`` (:mod:`trek.imports.anthropic_messages`)
* ``inspect-ai`` (:mod:`trek.imports.inspect_ai`): brings its own questions
* ``chat-completions`` (:mod:`trek.imports.chat_completions`)
* ``gemini`` (:mod:`trek.imports.gemini`)
* ``otlp`` (:mod:`trek.imports.otlp`): OpenTelemetry traces (GenAI or OpenInference attributes)
* ``langfuse`` (:mod:`trek.imports.langfuse`): Langfuse trace exports
* ``phoenix`` (:mod:`trek.imports.phoenix`): a project of a running Phoenix server (its client)
* ``mlflow`` (:mod:`trek.imports.mlflow`): an experiment of an MLflow tracking server
  (``mlflow.search_traces``)

The two server formats take one URL instead of files (``location``: the Phoenix project or
MLflow experiment) and read their traces as ``otlp`` does. The trace formats read their files whole (a trace's spans may be spread over several
records) and share :mod:`trek.imports.spans`; ``search_tools`` and ``question_key`` apply to them.

Any failure raises :class:`~trek.imports.common.ImportFailure` (or
:class:`~trek.types.RecordError` for a questions file) naming the file and record, before
anything is written.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from trek.imports import (
    anthropic_messages,
    chat_completions,
    gemini,
    inspect_ai,
    langfuse,
    mlflow,
    openai_responses,
    otlp,
    phoenix,
)
from trek.imports.common import (
    ImportFailure,
    PageSpool,
    holding_out,
    iter_matched,
    iter_records,
    match_traces,
    trajectory,
    write_run,
)
from trek.imports.fields import FieldError
from trek.imports.questions import load_questions, parse_mapping
from trek.imports.spans import DEFAULT_SEARCH_TOOLS, TraceOptions
from trek.jsonio import unique_paths
from trek.pages import Page
from trek.runs import RunDir
from trek.types import Question, Trajectory

__all__ = ["FORMATS", "ImportFailure", "ImportReport", "import_run", "load_questions", "parse_mapping"]

#: The importer of each format name.
FORMATS: dict[str, ModuleType] = {
    "openai-responses": openai_responses,
    "anthropic-messages": anthropic_messages,
    "inspect-ai": inspect_ai,
    "chat-completions": chat_completions,
    "gemini": gemini,
    "otlp": otlp,
    "langfuse": langfuse,
    "phoenix": phoenix,
    "mlflow": mlflow,
}


@dataclass
class ImportReport:
    """What :func:`import_run` wrote: the run directory, its trajectories, the pages stored, the
    samples left out (other epochs) and the coverage of the run."""

    out: Path
    count: int
    pages: int
    skipped: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    #: Grades and TrekTrace records carried over from the log (inspect's trek/grade, trek/trektrace).
    grades: int = 0
    traces: int = 0
    #: For each coverage field, how many trajectories have each value.
    coverage_counts: dict[str, Counter[str]] = field(default_factory=dict)
    #: Questions of the questions file that no trace answers (trace formats: left out of the run).
    unmatched: int = 0
    questions_file: str | None = None

    @property
    def trajectories(self) -> list[Trajectory]:
        """The imported trajectories, read back from the run directory (the import itself keeps none)."""
        from trek import runs

        return list(runs.load_answers(self.out).values())

    def coverage(self) -> dict[str, Counter[str]]:
        """For each coverage field, how many trajectories have each value."""
        return self.coverage_counts

    def note(self, t: Trajectory) -> Trajectory:
        """Count one trajectory as it goes to the run directory."""
        self.count += 1
        self.statuses[t.status] += 1
        for k, v in t.observed.model_dump(exclude={"notes"}).items():
            self.coverage_counts.setdefault(k, Counter())[v] += 1
        return t

    def describe(self) -> str:
        n = self.count
        lines = [f"imported {n} trajectories ({', '.join(f'{k} {v}' for k, v in sorted(self.statuses.items()))}) "
                 f"and {self.pages} page(s) into {self.out}"]
        if self.skipped:
            lines.append(f"left out {self.skipped} sample(s) of other epochs")
        if self.unmatched:
            lines.append(f"{self.unmatched} question(s) of {self.questions_file or 'the questions file'} have no trace "
                         "in the source: the run holds the others")
        if self.grades or self.traces:
            lines.append(f"carried over from the log's Trek scores: {self.grades} grade(s), {self.traces} trace record(s)")
        cov = "; ".join(f"{k}: " + ", ".join(f"{v} {c}" for v, c in sorted(cnt.items()))
                        for k, cnt in self.coverage().items())
        lines.append(f"coverage: {cov}")
        return "\n".join(lines)


def import_run(
    fmt: str,
    files: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    questions: str | os.PathLike[str] | None = None,
    mapping: Mapping[str, str] | None = None,
    dataset: str | None = None,
    model: str | None = None,
    epoch: int = 1,
    replace: bool = False,
    search_tools: Sequence[str] | None = None,
    question_key: str = "question_id",
    in_order: bool = False,
    project: str | None = None,
    experiment: str | None = None,
) -> ImportReport:
    """Import ``files`` of format ``fmt`` into the run directory ``out`` (see the module docstring).

    ``questions`` (with ``mapping`` and ``dataset``, see :func:`load_questions`) is required for
    every format but ``inspect-ai``, whose samples bring their questions (a questions file
    then replaces them, matched by sample id). ``model`` names the evaluated model when the log
    does not (or overrides it). ``replace``: an existing run directory is replaced (only once
    the import succeeded). ``search_tools`` (globs on tool names, default
    :data:`~trek.imports.spans.DEFAULT_SEARCH_TOOLS`) and ``question_key`` (the trace metadata
    or attribute naming the question id) apply to ``otlp``, ``langfuse``, ``phoenix`` and
    ``mlflow``, whose traces are matched to questions by id, else by question text, or in order
    only with ``in_order`` (:func:`~trek.imports.common.match_traces`); the run then holds the
    questions that have a trace (``ImportReport.unmatched`` counts the others). The server
    formats take one URL in ``files``; ``project`` names the ``phoenix`` project, ``experiment``
    the ``mlflow`` experiment (a name or an id).
    """
    mod = FORMATS.get(fmt)
    if mod is None:
        raise ImportFailure(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    remote = getattr(mod, "REMOTE", False)
    if project is not None and mod is not phoenix:
        raise ImportFailure("--project names a Phoenix project: it goes with trek import phoenix")
    if experiment is not None and mod is not mlflow:
        raise ImportFailure("--experiment names an MLflow experiment: it goes with trek import mlflow")
    location = project if mod is phoenix else experiment
    if not files:
        raise ImportFailure("no server URL given" if remote else "no input file given")
    if remote:
        if len(files) != 1:
            raise ImportFailure(f"{fmt}: give one server URL, not {len(files)}")
        files = [str(files[0])]
    else:
        files, again = unique_paths(files)
        if again:
            raise ImportFailure(f"{again[0]}: given more than once; each log is imported once")
    target = RunDir(out).check_target("import", option="--out")
    if replace:
        target.check_replace("import", inputs=[*([] if remote else files), questions], option="--out")
    # one writer per run folder: refused at once while another command writes it, and held until
    # the imported run is in place
    with holding_out(out):
        return _import(mod, fmt, files, out, remote, location, questions=questions, mapping=mapping, dataset=dataset,
                       model=model, epoch=epoch, replace=replace, search_tools=search_tools,
                       question_key=question_key, in_order=in_order)


def _import(mod: ModuleType, fmt: str, files: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str],
            remote: bool, location: str | None, *, questions: str | os.PathLike[str] | None,
            mapping: Mapping[str, str] | None, dataset: str | None, model: str | None, epoch: int, replace: bool,
            search_tools: Sequence[str] | None, question_key: str, in_order: bool) -> ImportReport:
    qs: list[Question] | None = None
    if questions is not None:
        qs = load_questions(questions, mapping, dataset=dataset or "custom")
    elif mod is not inspect_ai:
        raise ImportFailure(f"{fmt}: give the questions file (--questions) the records answer")
    skipped = 0
    if mod is inspect_ai:
        records = []
        for f in files:
            recs, left = inspect_ai.read(f, epoch)
            records += recs
            skipped += left
        if qs is None:
            qs = []
            where: dict[str, str] = {}
            for r in records:
                q = inspect_ai.question(r, dataset)
                if q.id in where:
                    raise r.fail(f"question id {q.id!r} again (also in {where[q.id]})")
                where[q.id] = r.where
                qs.append(q)
    elif hasattr(mod, "read_traces"):
        options = TraceOptions(search_tools=tuple(search_tools or DEFAULT_SEARCH_TOOLS), question_key=question_key)
        records = (mod.read_traces(files, options, location) if remote  # type: ignore[attr-defined]
                   else mod.read_traces(files, options))
    else:  # read, parse and written one record at a time
        records = (r for f in files for r in iter_records(f, is_item=getattr(mod, "is_item", None)))
    by_id = {q.id: q for q in qs}
    report = ImportReport(out=Path(out), count=0, pages=0, skipped=skipped)
    if hasattr(mod, "read_traces"):
        matched = match_traces(records, by_id, questions, in_order=in_order)
        report.unmatched = len(qs) - len(matched)
        report.questions_file = str(questions) if questions else None
        qs = [q for q, _ in matched]
        pairs: Iterator[tuple[Question, Any]] = iter(matched)
    else:
        pairs = iter_matched(records, by_id, questions)
    pages = PageSpool()  # on disk: the page text a log holds need not fit in memory
    grades, traces, corpus = [], [], []
    responses: dict[str, str] = {}

    def trajectories() -> Iterator[Trajectory]:
        nonlocal corpus
        for q, r in pairs:
            try:
                parsed = mod.parse(r)
            except FieldError as e:
                raise r.fail(str(e)) from None
            if parsed.record_id is not None:
                if parsed.record_id in responses:
                    raise r.fail(f"response id {parsed.record_id!r} was already imported "
                                 f"({responses[parsed.record_id]}): the same response cannot answer two questions")
                responses[parsed.record_id] = r.where
            yield report.note(trajectory(q, r, parsed, fmt, model))
            pages.add(parsed.pages)
            if mod is inspect_ai:  # what Trek's own inspect scorers recorded, and the corpus of trek/mini
                g, tr = inspect_ai.carried(r)
                grades.extend([g] if g is not None else [])
                traces.extend([tr] if tr is not None else [])
                corpus = corpus or inspect_ai.corpus(r)

    def rows() -> Iterator[Page]:  # once every trajectory is written: the best text per URL
        for row in pages.rows():
            report.pages += 1
            yield row

    config = {"format": fmt, "files": [str(f) for f in files], "questions": str(questions) if questions else None,
              "epoch": epoch if mod is inspect_ai else None}
    if hasattr(mod, "read_traces"):
        config["search_tools"] = list(search_tools or DEFAULT_SEARCH_TOOLS)
        config["question_key"] = question_key
        config["in_order"] = in_order
    if remote:
        from trek.llm.client import endpoint_identity

        # run.json shows the server as the client's logs do: without the credentials its URL may carry
        config["files"] = [endpoint_identity(str(f)) for f in files]
        config[mod.LOCATION.lstrip("-")] = location  # type: ignore[attr-defined]
    from trek import runs

    try:
        report.out = write_run(out, qs, trajectories(), rows(), config, replace=replace, documents=lambda: corpus,
                               records=lambda: {runs.GRADES: grades, runs.TRACE: traces})
    finally:
        pages.close()
    report.grades, report.traces = len(grades), len(traces)
    return report
