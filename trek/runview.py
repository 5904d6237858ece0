"""``trek view RUN``: one self-contained HTML page to read a run as it is, traced or not.

Per question: the question, its reference answers and dataset, what the system answered and how
the run ended for it (``ok``, ``no_answer``, ``pending``, ``failed`` with its error), the grade
when the run is graded (outcome and grader), the TrekTrace labels when it is traced (with the
verdicts of ``trek trace verify`` beside them when the run has a ``verify.jsonl``), and the
trajectory: every search call (query, the URLs it returned) and every page opened. Filters by
dataset, grade and status. The records are read one question at a time (answers, grades and
trace records are streamed); nothing is fetched. ``trek trace view`` shows the traced cases with
their tests; this page is for any run, before grading or tracing too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from html import escape
from pathlib import Path

from trek import runs
from trek.trace.labels import in_c4_order
from trek.types import iter_json_lines

__all__ = ["VIEW_FILE", "write_run_view"]

#: The page's default name inside the run folder.
VIEW_FILE = "view.html"

_STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:1.5em;max-width:70em}
.case{border:1px solid #ccc;border-radius:6px;padding:.6em .9em;margin:.7em 0}
.meta{color:#555;font-size:12px}.q{font-weight:600}.k{color:#555}
.correct{color:#1a7f37}.incorrect{color:#b42318}.other{color:#9a6700}
details{margin:.3em 0}code{font-size:12px;word-break:break-all}ol{margin:.2em 0 .2em 1.2em;padding:0}"""

_SCRIPT = """function f(){const d=document.getElementById('ds').value,g=document.getElementById('gr').value,
s=document.getElementById('st').value;let n=0;for(const c of document.querySelectorAll('.case')){
const ok=(!d||c.dataset.ds===d)&&(!g||c.dataset.gr===g)&&(!s||c.dataset.st===s);c.hidden=!ok;n+=ok}
document.getElementById('n').textContent=n}"""


def _e(text: object) -> str:
    return escape("" if text is None else str(text), quote=True)


def _last_by_question(path: Path) -> dict[str, int]:
    """``{question id: byte offset of its last record}`` of a JSONL journal (the last one counts)."""
    out: dict[str, int] = {}
    if not path.is_file():
        return out
    with path.open("rb") as f:
        offset = 0
        for line in f:
            if line.strip():
                try:
                    qid = json.loads(line).get("question_id")
                except ValueError:
                    qid = None  # a torn last line: the loaders report it
                if qid is not None:
                    out[str(qid)] = offset
            offset += len(line)
    return out


def _read_at(path: Path, offset: int | None) -> dict | None:
    if offset is None:
        return None
    with path.open("rb") as f:
        f.seek(offset)
        return json.loads(f.readline())


def _options(values: Iterable[str]) -> str:
    return '<option value="">all</option>' + "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in values)


def _verdicts(path: Path) -> dict[str, list[dict]]:
    """``{question id: the last record of each experiment}`` of ``verify.jsonl`` (one record per
    labelled case and experiment: small beside the run; empty without the file)."""
    last: dict[tuple[str, str], dict] = {}
    if path.is_file():
        for _, v in iter_json_lines(path, torn_tail=True, warn_torn=False):
            last[(str(v.get("question_id")), str(v.get("experiment")))] = v
    out: dict[str, list[dict]] = {}
    for (qid, _), v in last.items():
        out.setdefault(qid, []).append(v)
    return out


def _verified(t: dict | None, checks: list[dict]) -> str:
    """`` · verified: Distraction confirmed`` for the experiments made for the labels the trace
    record carries now (``""`` when none)."""
    labels = (t or {}).get("labels") or []
    words = []
    for v in checks:
        if v.get("label") in labels and (not v.get("labels") or v.get("labels") == labels):
            state = v.get("verdict") if v.get("status", "done") == "done" and v.get("verdict") else v.get("status")
            words.append(f"{v.get('label')} {state}")
    return " · verified: " + ", ".join(words) if words else ""


def _case(q: dict, a: dict | None, g: dict | None, t: dict | None,
          checks: list[dict] | None = None) -> tuple[str, str, str]:
    """``(grade shown, answer status, the case's HTML)`` of one question."""
    status = a.get("status", "ok") if a is not None else "not answered"
    outcome = (g or {}).get("outcome") if g else None
    cls = "correct" if outcome == "correct" else "incorrect" if outcome == "incorrect" else "other"
    grade = f'<span class="{cls}">{_e(outcome)}</span> ({_e(g.get("grader"))})' if g else "not graded"
    labels = ", ".join(in_c4_order(t.get("labels") or [])) if t and t.get("status") == "done" else \
        (f"trace {t.get('status')}" if t else "not traced")
    labels += _verified(t, checks or [])
    calls = (a or {}).get("search_calls") or []
    searches = "".join(
        f"<li>{_e(c.get('query'))}<ol>" + "".join(f"<li><code>{_e(r.get('url'))}</code></li>"
                                                  for r in c.get("results") or []) + "</ol></li>" for c in calls)
    opened = "".join(f"<li><code>{_e(u)}</code></li>" for u in (a or {}).get("opened_urls") or [])
    error = f'<div class="meta">error: {_e(a.get("error"))}</div>' if a and a.get("error") else ""
    return outcome or "not graded", status, (f'<div class="case" data-ds="{_e(q.get("dataset"))}" data-gr="{_e(outcome or "not graded")}" '
            f'data-st="{_e(status)}"><div class="meta">{_e(q.get("id"))} · {_e(q.get("dataset"))} · answer '
            f'{_e(status)} · grade {grade} · {_e(labels)}</div><div class="q">{_e(q.get("question"))}</div>'
            f'<div><span class="k">reference:</span> {_e(" | ".join(map(str, q.get("answers") or [])))}</div>'
            f'<div><span class="k">answer:</span> {_e((a or {}).get("final_answer"))}</div>{error}'
            f'<details><summary>{len(calls)} search call(s), {len((a or {}).get("opened_urls") or [])} page(s) '
            f'opened</summary><ol>{searches}</ol>' + (f"<div class='k'>opened:</div><ol>{opened}</ol>" if opened
                                                      else "") + "</details></div>")


def _cases(run_dir: Path) -> Iterator[tuple[dict, tuple[str, str, str]]]:
    answers, grades, trace = (run_dir / runs.ANSWERS, run_dir / runs.GRADES, run_dir / runs.TRACE)
    at_a, at_g, at_t = _last_by_question(answers), _last_by_question(grades), _last_by_question(trace)
    verdicts = _verdicts(run_dir / runs.VERIFY)
    for _, q in iter_json_lines(run_dir / runs.QUESTIONS):
        qid = str(q.get("id"))
        yield q, _case(q, _read_at(answers, at_a.get(qid)), _read_at(grades, at_g.get(qid)),
                       _read_at(trace, at_t.get(qid)), verdicts.get(qid))


def write_run_view(run_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> Path:
    """Write the page of ``run_dir`` to ``out`` (default ``RUN_DIR/view.html``) whole or not at
    all, and return its path. A folder without ``questions.jsonl`` is a ``FileNotFoundError``
    naming it."""
    from trek.outputs import atomic_write

    d = Path(run_dir)
    if not (d / runs.QUESTIONS).is_file():
        raise FileNotFoundError(f"{d}: no {runs.QUESTIONS} there, so it is not a run folder (trek wild run and "
                                "trek import write one)")
    meta = runs.read_meta(d)
    body: list[str] = []
    datasets: dict[str, None] = {}
    outcomes: dict[str, None] = {}
    statuses: dict[str, None] = {}
    for q, (outcome, status, html) in _cases(d):
        body.append(html)
        datasets[str(q.get("dataset"))] = None
        outcomes[outcome] = None
        statuses[status] = None
    n = len(body)
    title = f"{d.name}: {meta.model if meta else 'unknown model'}, {n} questions"
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)}</title><style>{_STYLE}</style>"
            f"<script>{_SCRIPT}</script></head><body><h1>{_e(title)}</h1><p>dataset <select id='ds' "
            f"onchange='f()'>{_options(datasets)}</select> grade <select id='gr' onchange='f()'>{_options(outcomes)}"
            f"</select> answer <select id='st' onchange='f()'>{_options(statuses)}</select> · <span id='n'>{n}"
            f"</span> shown</p>{''.join(body)}</body></html>\n")
    target = Path(out) if out else d / VIEW_FILE
    atomic_write(target, page)
    return target
