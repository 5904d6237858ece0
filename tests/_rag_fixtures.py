"""Small contexts.jsonl writer for the baseline tests (the issue-12 record schema).

It renders documents the way the Ctrl builder does (``[Document i]``, ``Date:``, ``Source URL:``,
text; blank line between documents) without sampling or synthetic distractors, so the RAG tests
do not depend on the builder.
"""

import hashlib
import json

from trek.types import Document


def render(docs, show_urls=True):
    parts = []
    for i, d in enumerate(docs, start=1):
        meta = f"Date: {d.date.isoformat()}\n" if d.date else ""
        if show_urls:
            meta += f"Source URL: {d.url}\n"
        parts.append(f"[Document {i}]\n{meta}{d.text.strip()}")
    return "\n\n".join(parts)


def record(qid, condition, docs, show_urls=True, dataset="freshqa"):
    rendered = render(docs, show_urls)
    return {
        "question_id": qid,
        "dataset": dataset,
        "condition": condition,
        "documents": [
            {"doc_id": d.id, "role": d.role, "url": d.url if show_urls else None,
             "date": d.date.isoformat() if d.date else None, "synthetic": False, "text": d.text.strip()}
            for d in docs
        ],
        "n_distractors": sum(1 for d in docs if d.role != "gold"),
        "rendered": rendered,
        "sha256": hashlib.sha256(rendered.encode()).hexdigest(),
    }


def mini_contexts(bench, question_ids=None):
    """OO, MND, SAA, SBA and GOLD records for the demo benchmark (order: outdated/relevance, then gold)."""
    out = []
    for q in bench.questions:
        if question_ids is not None and q.id not in question_ids:
            continue
        gold = bench.documents_for(q.id, "gold")
        old = bench.documents_for(q.id, "outdated")
        rel = bench.documents_for(q.id, "relevance")
        oo = old[:20] + gold
        mnd = old[:10] + rel[:10] + gold
        out += [record(q.id, "OO", oo), record(q.id, "MND", mnd), record(q.id, "SAA", mnd),
                record(q.id, "SBA", mnd, show_urls=False), record(q.id, "GOLD", gold)]
    return out


def write_contexts(path, records, questions=None):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    if questions is not None:
        (path.parent / "questions.jsonl").write_text("".join(q.model_dump_json() + "\n" for q in questions))
    return path


def doc(i, date=None, text=None, role="outdated"):
    import datetime as dt

    return Document(id=f"d{i}", url=f"https://example.org/{i}", date=dt.date.fromisoformat(date) if date else None,
                    text=text or f"Text of document {i}.", role=role)
