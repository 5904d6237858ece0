"""The case viewer: ``trek trace view RUN_DIR...`` -> one self-contained HTML file.

Every traced case is a collapsible block with its labels; filters select by label, dataset and
run. Expanding a case shows the evidence behind its labels: flags, queries, the whole retrieved
collection with the URLs that matched a gold URL (or were named equivalent) highlighted, the URL
matches, key and matched evidence, both probes' answers and grades, and every model call with
its raw replies. Where ``trek trace verify`` has run (``verify.jsonl``), a case also shows each
experiment's verdict with its reason, the minimal distracting set (URLs and Ctrl kinds) and the
repaired queries with whether the gold page came back; its labels stay as the trace gave them.

Safety: every piece of question, document or model text is HTML-escaped, and the page carries a
Content-Security-Policy that allows no external resource and only its own inline script (by
hash), so text that looks like markup is shown, never run.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path

from trek.outputs import atomic_write, check_out
from trek.pages import normalize_url
from trek.trace.labels import DEFINITIONS, LABELS
from trek.trace.pipeline import load_trace
from trek.trace.records import Step, TraceRecord
from trek.trace.verified import (
    CaseVerification,
    query_came_back,
    state,
    verdict_text,
    verify_by_case,
)
from trek.trace.verify import VerifyRecord

__all__ = ["render_html", "write_view", "case_html", "scoped_css"]

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:72em;padding:0 1em;color:#222}
h1{font-size:1.4em}#filters{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #ccc}
details.case{border:1px solid #ccc;border-radius:4px;margin:.4em 0;padding:.3em .6em}
summary{cursor:pointer}.lab{display:inline-block;border-radius:3px;padding:0 .4em;margin-right:.3em;
font-size:.85em;background:#eee}.lab.Pre-retrieval{background:#fde2c8}.lab.Retrieval{background:#fbd0d0}
.lab.Interpretation{background:#d8e4fb}.lab.Distraction{background:#e3d5f5}.lab.Randomness{background:#dfeedd}
.lab.pending{background:#ddd;color:#555}.lab.stale{background:#fff;border:1px dashed #b00;color:#b00}table{border-collapse:collapse;margin:.4em 0}td,th{border:1px solid #ddd;
padding:.2em .5em;vertical-align:top;text-align:left}pre{white-space:pre-wrap;background:#f7f7f7;padding:.4em;
max-height:20em;overflow:auto}mark{background:#fff2a8}.meta{color:#666;font-size:.9em}
.lab.v-confirmed{background:#fff;border:1px solid #2a7a3a;color:#2a7a3a}.lab.v-refuted{background:#fff;
border:1px solid #b00;color:#b00}.lab.v-other{background:#fff;border:1px solid #888;color:#555}
"""

_JS = """
(function(){
  var L=document.getElementById('f-label'),D=document.getElementById('f-dataset'),R=document.getElementById('f-run');
  var cases=document.querySelectorAll('details.case');
  function apply(){
    var n=0;
    for(var i=0;i<cases.length;i++){
      var c=cases[i];
      var ok=(!L.value||c.getAttribute('data-labels').indexOf('|'+L.value+'|')>=0)
        &&(!D.value||c.getAttribute('data-dataset')===D.value)&&(!R.value||c.getAttribute('data-run')===R.value);
      c.hidden=!ok; if(ok){n++;}
    }
    document.getElementById('shown').textContent=n+' of '+cases.length+' cases shown';
  }
  L.addEventListener('change',apply);D.addEventListener('change',apply);R.addEventListener('change',apply);
  apply();
})();
"""


def _e(text: object) -> str:
    return escape("" if text is None else str(text), quote=True)


def _flag(v: bool | None) -> str:
    return "unknown" if v is None else ("yes" if v else "no")


def _options(values: Iterable[str]) -> str:
    return '<option value="">all</option>' + "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in values)


def _steps_table(steps: Sequence[Step]) -> str:
    """Model calls, one row each: step, role, model, status, version, the raw replies (or the error)."""
    rows = "".join(
        f"<tr><td>{_e(s.name)}</td><td>{_e(s.role)}</td><td>{_e(s.model)}</td><td>{_e(s.status)}</td>"
        f"<td>{_e(s.version)}</td><td>{''.join(f'<pre>{_e(x)}</pre>' for x in s.raw)}{_e(s.error or '')}</td></tr>"
        for s in steps
    )
    return ("<table><tr><th>step</th><th>role</th><th>model</th><th>status</th><th>version</th>"
            f"<th>replies</th></tr>{rows}</table>")


_EXPERIMENT_NAMES = {"distractor_search": "distractor search", "query_repair": "query repair"}


def _distractor_html(v: VerifyRecord) -> str:
    head = (f"{v.noise_pages} noise page(s) searched" if v.noise_pages is not None else "no noise page searched")
    head += f" by {v.search}" if v.search else ""
    words = {True: "right", False: "wrong", None: "unknown"}
    probes = "".join(f"<tr><td>{len(t.noise)}</td><td>{t.draw}</td><td>{_e(words[t.correct])}</td>"
                     f"<td>{_e(t.answer or '-')}</td></tr>" for t in v.tests)
    asked = (f"<details><summary>{len(v.tests)} probe(s) asked</summary><table><tr><th>noise pages kept</th>"
             f"<th>draw</th><th>answer graded</th><th>answer</th></tr>{probes}</table></details>") if probes else ""
    if v.minimal_set:
        kept = "confirmed" if v.verdict == "confirmed" else "found, not confirmed"
        items = "".join(f"<li>{_e(p.url)}" + (f' <span class="meta">Ctrl: {_e(p.ctrl_kind)}</span>' if p.ctrl_kind
                                               else "") + "</li>" for p in v.minimal_set)
        return f"<p>Minimal distracting set ({_e(kept)}; {_e(head)}):</p><ol>{items}</ol>{asked}"
    return f"<p>Minimal distracting set: none found ({_e(head)}).</p>{asked}"


def _repair_html(v: VerifyRecord) -> str:
    backend = v.backend or "none recorded"
    head = f"Search backend: {backend}" + (" (a live web search, at a later date)" if v.live else "")
    if not v.repaired_queries:
        return f"<p>{_e(head)}; no repaired query.</p>"
    found = {normalize_url(u) for u in v.found_urls or []}
    words = {True: "yes", False: "no", None: "not searched"}
    rows = []
    for q in v.repaired_queries:
        results = (v.results or {}).get(q)
        shown = "".join(f"<li>{'<mark>' + _e(u) + '</mark>' if normalize_url(u) in found else _e(u)}</li>"
                        for u in results or []) or "<li>(none)</li>"
        rows.append(f"<tr><td>{_e(q)}</td><td>{_e(words[query_came_back(v, q)])}</td><td><ol>{shown}</ol></td></tr>")
    how = {"url-identity": "by URL identity", "evidence-match": "by the evidence match"}.get(v.found_by or "", "")
    outcome = (f"the gold page or its evidence came back {how}".strip() if v.found_urls
               else "no gold page or equivalent came back") + (f": {v.outcome}" if v.outcome else "")
    return (f"<p>{_e(head)}; {_e(outcome)} (highlighted: counted as the gold page or its equivalent).</p>"
            "<table><tr><th>repaired query</th><th>gold page came back</th><th>results</th></tr>"
            + "".join(rows) + "</table>")


def _verification_html(cv: CaseVerification | None) -> str:
    if cv is None:
        return ""
    rows, details = [], []
    for exp in ("distractor_search", "query_repair"):
        v = cv.get(exp)
        if v is None:
            continue
        why = v.reason if v.status == "done" else v.error
        rows.append(f"<tr><td>{_e(_EXPERIMENT_NAMES[exp])}</td><td>{_e(v.label)}</td><td>{_e(state(v))}</td>"
                    f"<td>{_e(why or '-')}</td><td>{v.calls}</td></tr>")
        details.append(_distractor_html(v) if exp == "distractor_search" else _repair_html(v))
    stale = ""
    if cv.stale:
        made = "; ".join(f"{_EXPERIMENT_NAMES.get(v.experiment, v.experiment)} for {', '.join(v.labels) or v.label}"
                         for v in cv.stale)
        stale = (f'<p class="meta">{len(cv.stale)} earlier experiment(s) made for other labels ({_e(made)}) are '
                 "stale and not shown: run trek trace verify again.</p>")
    if not rows and not stale:
        return ""
    table = ("<table><tr><th>experiment</th><th>label tested</th><th>verdict</th><th>reason</th><th>calls</th></tr>"
             + "".join(rows) + "</table>") if rows else ""
    steps = [st for exp in ("distractor_search", "query_repair") if (v := cv.get(exp)) is not None for st in v.steps]
    calls = (f"<details><summary>{len(steps)} verification call(s)</summary>{_steps_table(steps)}</details>"
             if steps else "")
    return ("<h4>Verification (trek trace verify; the labels above are the trace's, unchanged)</h4>"
            + table + "".join(details) + calls + stale)


def _verify_badges(cv: CaseVerification | None) -> str:
    if cv is None:
        return ""
    out = []
    for exp in ("distractor_search", "query_repair"):
        v = cv.get(exp)
        if v is not None:
            s = state(v)
            kind = s if s in ("confirmed", "refuted") else "other"
            out.append(f'<span class="lab v-{kind}" title="{_e(verdict_text(v))}">{_e(v.label)} {_e(s)}</span>')
    return "".join(out)


def _case(run: str, r: TraceRecord, open_: bool = False, verification: CaseVerification | None = None) -> str:
    labels = r.labels if r.status == "done" else [r.status, *r.labels]
    badges = "".join(f'<span class="lab {_e(lab)}">{_e(lab)}</span>' for lab in labels)
    badges += _verify_badges(verification)
    if r.stale_reference:
        badges += '<span class="lab stale">stale reference?</span>'
    if r.evidence_lower_bound:
        badges += '<span class="lab stale">retrieval: lower bound</span>'
    hits = {normalize_url(m.matched_url) for m in r.url_matches if m.matched_url}
    hits |= {normalize_url(u) for u in r.equivalent_urls}
    retrieved = "".join(
        f"<li>{'<mark>' + _e(u) + '</mark>' if normalize_url(u) in hits else _e(u)}</li>" for u in r.retrieved_urls
    ) or "<li>(none)</li>"
    matches = "".join(f"<tr><td>{_e(m.gold_url)}</td><td>{_e(m.matched_url or '-')}</td></tr>" for m in r.url_matches)
    queries = "".join(f"<li>{_e(q)}</li>" for q in r.queries) or "<li>(none)</li>"
    n = _flag(r.noise_correct) if r.noise_was_run else "not run"
    rows = [
        ("Reference answers", " | ".join(r.answers)),
        ("Effective year", r.effective_year or "not given"),
        ("Prediction", r.prediction or "(none)"),
        ("Flags", f"E evidence retrieved: {_flag(r.evidence_retrieved)} ({r.retrieval_basis or '-'}); "
                  f"Q queries adequate: {_flag(r.query_adequate)}; G gold-only correct: {_flag(r.gold_only_correct)}; "
                  f"N gold-plus-noise correct: {n}"),
        ("Key evidence (gold)", r.key_evidence or "-"),
        ("Matched evidence (retrieved)", r.retrieved_key_evidence or "-"),
        ("Evidence reason", r.evidence_reason or "-"),
        ("Query assessment", r.query_reason or "-"),
        ("Gold-only answer", f"{r.gold_only_answer or '-'} — {r.gold_only_grade_reason or ''}"),
        ("Gold-plus-noise answer", f"{r.noise_answer or '-'} — {r.noise_grade_reason or ''}"),
        ("Stale reference", "not checked" if r.stale_reference is None else
         f"{'flagged' if r.stale_reference else 'supported'} — {r.stale_reason or ''}"),
        ("Status", r.status + (f": {r.error}" if r.error else "")),
        ("Tests", "; ".join(f"{k}: {t.state}" + (f" ({t.reason})" if t.reason else "") for k, t in r.tests.items())
         or "-"),
        ("What the log shows", "everything" if r.coverage is None else
         f"queries {r.coverage.queries}, results {r.coverage.results}, page text {r.coverage.page_text}, "
         f"URLs {r.coverage.url_identity}" + "".join(f"; {n}" for n in r.coverage_notes)),
    ]
    table = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return (
        f'<details class="case"{" open" if open_ else ""} data-labels="|{_e("|".join(labels))}|" data-dataset="{_e(r.dataset)}" '
        f'data-run="{_e(run)}"><summary>{badges}<b>{_e(r.question_id)}</b> <span class="meta">[{_e(run)} · '
        f"{_e(r.dataset)}]</span> {_e(r.question)}</summary>"
        f"<table>{table}</table>"
        f"<h4>Queries</h4><ol>{queries}</ol>"
        f"<h4>Retrieved URLs ({len(r.retrieved_urls)}; highlighted: same identity as a gold URL or named "
        f"equivalent)</h4><ol>{retrieved}</ol>"
        f"<h4>Gold URL matches</h4><table><tr><th>gold URL</th><th>retrieved URL</th></tr>{matches}</table>"
        f"<h4>Gold-plus-noise context</h4><ol>{''.join(f'<li>{_e(u)}</li>' for u in r.noise_context)}</ol>"
        f"{_verification_html(verification)}"
        f"<h4>Model calls</h4>{_steps_table(r.steps)}</details>"
    )


def case_html(r: TraceRecord, run: str = "", open_: bool = True,
              verification: CaseVerification | None = None) -> str:
    """One case as the viewer shows it (the same escaped block, expanded when ``open_``), for a
    page of its own making: a notebook's inline view (:meth:`trek.api.Case._repr_html_`). Style it
    with :func:`scoped_css`; the fragment carries no script. ``verification``: the case's
    experiments (:func:`trek.trace.verified.verify_by_case`), shown when given."""
    return _case(run, r, open_, verification)


def scoped_css(scope: str) -> str:
    """The viewer's style rules for its cases, each selector put under ``scope`` (a CSS selector
    such as ``.trek-case``), without the page-wide rules (``body``, the title, the filter bar): a
    fragment shown inside another page (JupyterLab) restyles nothing outside ``scope``."""
    out = []
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", _CSS):
        mine = [s.strip() for s in selectors.split(",") if s.strip() and s.strip().split()[0] not in _PAGE_ONLY]
        if mine:
            out.append(",".join(f"{scope} {s}" for s in mine) + "{" + body.strip() + "}")
    return "".join(out)


#: Selectors of :data:`_CSS` that style the viewer's page rather than a case.
_PAGE_ONLY = ("body", "h1", "#filters")


def render_html(items: Sequence[tuple[str, TraceRecord]], title: str = "TrekTrace cases",
                verification: Sequence[CaseVerification | None] | None = None) -> str:
    """The viewer page for ``(run label, record)`` pairs; ``verification``, when given, holds each
    pair's experiments (``None`` for a case without)."""
    script_hash = base64.b64encode(hashlib.sha256(_JS.encode("utf-8")).digest()).decode()
    csp = (f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{script_hash}'; "
           "img-src 'none'; connect-src 'none'; form-action 'none'; base-uri 'none'")
    datasets = sorted({r.dataset for _, r in items})
    run_labels = list(dict.fromkeys(run for run, _ in items))
    legend = "".join(f"<li><b>{_e(k)}</b>: {_e(v)}</li>" for k, v in DEFINITIONS.items())
    checks = list(verification) if verification is not None else [None] * len(items)
    if len(checks) != len(items):
        raise ValueError(f"verification has {len(checks)} entries for {len(items)} cases")
    body = "".join(_case(run, r, verification=v) for (run, r), v in zip(items, checks, strict=True))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{_e(title)}: {len(items)} case(s)</h1>"
        "<p class=\"meta\">A case may carry a retrieval-side and a post-retrieval label, so label shares need "
        "not sum to 100%.</p>"
        f"<details><summary>Label definitions</summary><ul>{legend}</ul></details>"
        '<div id="filters">Label <select id="f-label">' + _options([*LABELS, "pending"]) + "</select> "
        'Dataset <select id="f-dataset">' + _options(datasets) + "</select> "
        'Run <select id="f-run">' + _options(run_labels) + '</select> <span id="shown"></span></div>'
        f'<div id="cases">{body}</div><script>{_JS}</script></body></html>\n'
    )


def write_view(run_dirs: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str] | None = None) -> Path:
    """Write the viewer for one or more traced runs (default ``<first run>/trace.html``)."""
    if not run_dirs:
        raise ValueError("give at least one traced run directory")
    path = check_out(Path(out) if out else Path(run_dirs[0]) / "trace.html", runs=run_dirs, example="trace.html")
    items: list[tuple[str, TraceRecord]] = []
    checks: list[CaseVerification | None] = []
    for d in run_dirs:
        recs = load_trace(d)
        if not recs:
            raise FileNotFoundError(f"{d}: no trace.jsonl records (run `trek trace {d}` first)")
        items += [(Path(d).resolve().name, r) for r in recs]
        verified = verify_by_case(d, recs)
        checks += [verified.get(r.question_id) for r in recs]
    return atomic_write(path, render_html(items, verification=checks))
