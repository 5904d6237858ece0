"""Measure `trek import` on real logs that were not written for Trek.

    python benchmarks/import_real_logs.py FOLDER [--repeat 3] [--json]

Every log file under FOLDER (``.eval``, ``.json``, ``.jsonl``) is given a format by its content
(inspect eval log, Responses object, chat.completion, Anthropic message, Gemini response), a
questions file is made for it (the sample ids and inputs of an inspect log, ``q1..qN`` for
bare provider records; the reference answers are placeholders: this measures extraction, not
grading), and it is imported into a temporary run directory. Each record is then compared
with counts taken straight from the raw file by a walker written separately from the
importers: search queries, search results, citations and opened pages. A record *matches*
when all four agree. Prints one line per file and the totals; import times are medians of
``--repeat`` runs. Files that are not logs of a known format are listed as skipped, with the
reason. No third-party file is part of the repository: point the script at your own folder.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from trek import runs
from trek.imports import ImportFailure, import_run
from trek.imports.common import load_json
from trek.types import RecordError

WRAPPED: dict[Path, list[str]] = {}  # the question ids of files of wrapped records
_LINK = r"^\s*\[{}\] link\b[^\n]*\[url: ([^\]\s]+)\]"


# -- format detection and raw records ------------------------------------------------------------
def _samples(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".eval":
        with zipfile.ZipFile(path) as z:
            return [json.loads(z.read(n)) for n in sorted(z.namelist()) if re.match(r"^samples/.+\.json$", n)]
    return list(load_json(path).get("samples") or [])


def detect(path: Path) -> tuple[str | None, list[Any], str]:
    """``(format, raw records, reason)``; format ``None`` with the reason when not a known log."""
    try:
        if path.suffix == ".eval":
            return "inspect-ai", _samples(path), ""
        if path.suffix == ".jsonl":
            data: Any = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        else:
            data = load_json(path)
    except (ValueError, OSError, ImportFailure, zipfile.BadZipFile) as e:
        return None, [], f"unreadable ({e})"
    if isinstance(data, dict) and "eval" in data:
        return "inspect-ai", list(data.get("samples") or []), ""
    recs = data if isinstance(data, list) else [data]
    if not recs or not all(isinstance(r, dict) for r in recs):
        return None, [], "not a list of JSON objects"
    if all("question_id" in r and "record" in r for r in recs):  # wrappers: their ids name the questions
        WRAPPED[path] = [str(r["question_id"]) for r in recs]
        recs = [r["record"] for r in recs]
    first = recs[0][-1] if isinstance(recs[0], list) and recs[0] else recs[0]
    if not isinstance(first, dict):
        return None, [], "not a list of JSON objects"
    if ("output" in first and isinstance(first["output"], list)) or "new_items" in first or "items" in first:
        return "openai-responses", recs, ""
    if "choices" in first:
        return "chat-completions", recs, ""
    if "candidates" in first:
        return "gemini", recs, ""
    if first.get("type") == "message" and isinstance(first.get("content"), list):
        return "anthropic-messages", recs, ""
    return None, [], "no known log format"


# -- the reference counts, straight from the raw records -----------------------------------------
def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(c.get("text") or "" for c in content or [] if isinstance(c, dict) and c.get("type") == "text")


def _attach(value: Any, att: dict[str, Any]) -> Any:
    if isinstance(value, str) and value.startswith("attachment://"):
        return att.get(value[len("attachment://"):], value)
    return value


def reference(fmt: str, rec: dict[str, Any]) -> dict[str, int]:
    """Queries, results, citations and opened pages as the raw record holds them."""
    q = r = c = o = 0
    if isinstance(rec, list):  # the turns of one answer
        total = [reference(fmt, turn) for turn in rec]
        return {k: sum(t[k] for t in total) for k in ("queries", "results", "citations", "opened")}
    if fmt == "openai-responses":
        items = rec.get("output") or rec.get("new_items") or rec.get("items") or []
        for it in (i.get("raw_item", i) for i in items):
            a = it.get("action") or {}
            if it.get("type") == "web_search_call":
                if a.get("type") == "search":
                    q += max(len({x for x in [a.get("query"), *(a.get("queries") or [])] if x}), 1)
                    r += len([s for s in a.get("sources") or [] if s.get("url")]) * max(
                        len({x for x in [a.get("query"), *(a.get("queries") or [])] if x}), 1)
                elif a.get("url"):
                    o += 1
            if it.get("type") == "message":
                c += sum(1 for p in it.get("content") or [] for an in p.get("annotations") or []
                         if an.get("type") == "url_citation")
    elif fmt == "chat-completions":
        msg = (rec.get("choices") or [{}])[0].get("message") or {}
        c = sum(1 for an in msg.get("annotations") or [] if an.get("type") == "url_citation")
    elif fmt == "gemini":
        cand = (rec.get("candidates") or [{}])[0]
        meta = cand.get("groundingMetadata") or cand.get("grounding_metadata") or {}
        q = len(meta.get("webSearchQueries") or meta.get("web_search_queries") or [])
        sup = meta.get("groundingSupports") or meta.get("grounding_supports") or []
        c = len({i for s in sup for i in s.get("groundingChunkIndices") or s.get("grounding_chunk_indices") or []})
    elif fmt == "anthropic-messages":
        for b in rec.get("content") or []:
            if b.get("type") == "server_tool_use" and b.get("name") == "web_search":
                q += 1
            if b.get("type") == "server_tool_use" and b.get("name") == "web_fetch":
                o += 1
            if b.get("type") == "web_search_tool_result" and isinstance(b.get("content"), list):
                r += len(b["content"])
            if b.get("type") == "text":
                c += len(b.get("citations") or [])
    elif fmt == "inspect-ai":
        att = rec.get("attachments") or {}
        page = ""
        for m in rec.get("messages") or []:
            fn = m.get("function") or ""
            if m.get("role") == "assistant":
                for tc in m.get("tool_calls") or []:
                    if tc.get("function") == "web_search":
                        q += 1
                for p in m.get("content") if isinstance(m.get("content"), list) else []:
                    if isinstance(p, dict) and p.get("type") == "tool_use" and p.get("tool_type") == "web_search":
                        args = json.loads(p.get("arguments") or "{}") if p.get("arguments") else {}
                        res = json.loads(p["result"]) if str(p.get("result") or "").startswith("[") else []
                        if args.get("url"):
                            o += 1
                        else:
                            q += 1
                            r += len([x for x in res if isinstance(x, dict) and x.get("url")])
            if m.get("role") == "tool":
                content = _attach(m.get("content"), att)
                if fn == "web_search" and not m.get("error"):
                    r += sum(len(p.get("citations") or []) for p in content if isinstance(p, dict)) \
                        if isinstance(content, list) else 0
                if fn.startswith("web_browser") and not m.get("error"):
                    if fn == "web_browser_go":
                        o += 1
                    elif fn == "web_browser_click":
                        args = next((tc.get("arguments") or {} for a in rec["messages"] if a.get("role") == "assistant"
                                     for tc in a.get("tool_calls") or [] if tc.get("id") == m.get("tool_call_id")), {})
                        if re.search(_LINK.format(re.escape(str(args.get("element_id")))), page, re.MULTILINE):
                            o += 1
                    page = _text(content) or page
        out = (rec.get("output") or {}).get("choices") or []
        final = out[0].get("message") if out else None
        if final and isinstance(final.get("content"), list):
            c = sum(1 for p in final["content"] if isinstance(p, dict)
                    for ci in p.get("citations") or [] if ci.get("type", "url") == "url" and ci.get("url"))
    return {"queries": q, "results": r, "citations": c, "opened": o}


def imported(t: Any) -> dict[str, int]:
    return {"queries": len(t.search_calls), "results": sum(len(s.results) for s in t.search_calls),
            "citations": len(t.citations), "opened": sum(1 for s in t.steps if s.kind == "open" and s.url)}


# -- one file ------------------------------------------------------------------------------------
def measure(path: Path, repeat: int) -> dict[str, Any]:
    fmt, raw, why = detect(path)
    if fmt is None:
        return {"file": str(path), "skipped": why}
    with tempfile.TemporaryDirectory() as tmp:
        qfile = Path(tmp) / "questions.jsonl"
        if fmt == "inspect-ai":
            ids = [str(s["id"]) for s in raw if int(s.get("epoch") or 1) == 1]
        else:
            ids = WRAPPED.get(path) or [f"q{i}" for i in range(1, len(raw) + 1)]
        if not ids:
            return {"file": str(path), "skipped": f"{fmt} log without records"}
        qfile.write_text("".join(json.dumps({"id": i, "question": f"question {i}", "answers": ["(placeholder)"]}) + "\n"
                                 for i in ids))
        times = []
        try:
            for k in range(repeat):
                out = Path(tmp) / f"run{k}"
                t0 = time.perf_counter()
                import_run(fmt, [path], out, questions=qfile)
                times.append(time.perf_counter() - t0)
        except (ImportFailure, RecordError) as e:
            return {"file": str(path), "format": fmt, "error": str(e)}
        answers = runs.load_answers(out)
    rows = []
    by_id = {str(s["id"]): s for s in raw if int(s.get("epoch") or 1) == 1} if fmt == "inspect-ai" else \
        dict(zip(ids, raw, strict=True))
    for qid, rec in by_id.items():
        want, got = reference(fmt, rec), imported(answers[qid])
        rows.append({"id": qid, "want": want, "got": got, "match": want == got})
    return {"file": str(path), "format": fmt, "records": len(rows), "matched": sum(r["match"] for r in rows),
            "totals": {k: sum(r["want"][k] for r in rows) for k in ("queries", "results", "citations", "opened")},
            "mismatches": [r for r in rows if not r["match"]], "median_s": statistics.median(times)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="Print the results as JSON.")
    args = ap.parse_args(argv)
    files = sorted(p for p in args.folder.rglob("*") if p.suffix in (".eval", ".json", ".jsonl") and p.is_file())
    results = [measure(p, args.repeat) for p in files]
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    recs = matched = 0
    for r in results:
        name = Path(r["file"]).name
        if "skipped" in r:
            print(f"{name}: skipped ({r['skipped']})")
        elif "error" in r:
            print(f"{name}: {r['format']}: import refused: {r['error']}")
        else:
            recs, matched = recs + r["records"], matched + r["matched"]
            t = r["totals"]
            print(f"{name}: {r['format']}, {r['matched']}/{r['records']} records match "
                  f"(queries {t['queries']}, results {t['results']}, citations {t['citations']}, opened {t['opened']}); "
                  f"import {r['median_s'] * 1000:.1f} ms (median of {args.repeat})")
            for m in r["mismatches"]:
                print(f"    {m['id']}: file {m['want']} imported {m['got']}")
    print(f"total: {matched}/{recs} records match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
