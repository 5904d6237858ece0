"""The ``demo`` script of the fake OpenAI server: a toy model and toy judges that speak Trek's own
prompts, so that a tour of Trek gives grades, labels and inspect scores offline.

Nothing here is clever, and that is the point: every reply is a literal reading of the prompt,
made with regular expressions on the fake server (:mod:`trek.testing.fake_openai`), so the same
request always gets the same reply and a reader can predict it.

* **The evaluated model.** Asked to search (Trek's agent or an inspect search task), it searches
  once with the question itself as the query, then answers with the first snippet of the first
  result. Asked closed-book, it says it is not sure. As a TrekTrace probe, it answers with the
  first line of text of the first page shown (gold-only) or of the last page shown
  (gold-plus-noise), so a noise page placed last distracts it.
* **The judges.** A grader or an answer check calls an answer right when it contains the first
  reference answer, ignoring case (each grader replies in its own protocol: ``verdict:``,
  ``evaluation:``, Yes/No, A/B/C). The key evidence of a question is the first line of text of
  its first gold page; the retrieved pages match it when one of them contains that line word for
  word. Queries are adequate when at least one of them has three words or more; asked to repair
  queries (``trek trace verify``), it gives the question itself. Gold pages still support their
  reference.

Right and wrong answers follow from the pages a run retrieves, so a tour sees both. Rules are
tried in order: the TrekTrace steps first (their prompts carry a ``[TrekTrace: ...]`` marker),
then the graders, then the evaluated model.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEMO", "demo_script"]

#: The name ``--script`` takes for this script.
DEMO = "demo"

# What a reference answer is in each prompt: the first one, up to " | " or the end of the line.
_FIRST_REF = r"(?P<ref>[^|\n]+?)(?: \|[^\n]*)?\n"
# The rest of the prompt up to a backreference to the reference answer, staying inside the
# field that holds the answer being judged (it ends at the next blank line).
_UNTIL_REF = r"(?:(?!\n\n)[\s\S])*?(?P=ref)"
# The first page of a rendered page list: its URL and first line of text.
_FIRST_PAGE = r"\[1\] URL: (?P<url>\S+)\n(?:[^\n]+\n)*\n(?P<line>[^\n]+)"
# The last page of a rendered page list (greedy up to the last "[i] URL:").
_LAST_PAGE = r"[\s\S]*\[\d+\] URL: (?P<url>\S+)\n(?:[^\n]+\n)*\n(?P<line>[^\n]+)"


def _step(step: str) -> str:
    return rf"\[TrekTrace: {step}\]"


def _trace_rules() -> list[dict[str, Any]]:
    return [
        {"any_pattern": rf"(?i){_step('answer check')}[\s\S]*Reference answer\(s\): {_FIRST_REF}"
                        rf"[\s\S]*?Candidate answer: {_UNTIL_REF}",
         "reply": {"correct": True, "reason": "The candidate names {ref}."}},
        {"any_pattern": _step("answer check"),
         "reply": {"correct": False, "reason": "The candidate does not name the first reference answer."}},
        {"any_pattern": rf"{_step('key evidence')}[\s\S]*Gold pages:\n{_FIRST_PAGE}",
         "reply": {"key_evidence": "{line}", "gold_evidence_urls": ["{url}"]}},
        {"any_pattern": _step("key evidence"),
         "reply": {"key_evidence": "", "gold_evidence_urls": []}},
        {"any_pattern": rf"{_step('evidence match')}[\s\S]*Gold key evidence: (?P<ev>[^\n]+)\n[\s\S]*"
                        r"Retrieved pages:\n(?:[\s\S]*\n)?\[\d+\] URL: (?P<url>\S+)\n"
                        r"(?:(?!\n\[\d+\] URL: )[\s\S])*?(?P=ev)",
         "reply": {"evidence_match": True, "retrieved_key_evidence": "{ev}", "equivalent_urls": ["{url}"],
                   "reason": "A retrieved page states the gold evidence word for word."}},
        {"any_pattern": _step("evidence match"),
         "reply": {"evidence_match": False, "retrieved_key_evidence": "", "equivalent_urls": [],
                   "reason": "No retrieved page states the gold evidence word for word."}},
        {"any_pattern": rf"{_step('query adequacy')}[\s\S]*Search queries, in the order issued:\n"
                        r"(?:[^\n]*\n)*?[^\n]*\S+\s+\S+\s+\S+",
         "reply": {"query_adequate": True, "reason": "A query of three words or more aims at the question."}},
        {"any_pattern": _step("query adequacy"),
         "reply": {"query_adequate": False, "reason": "Every query has fewer than three words."}},
        {"any_pattern": rf"{_step('query repair')}[\s\S]*Question: (?P<q>[^\n]+)",
         "reply": {"queries": ["{q}"], "reason": "The question itself names what it asks."}},
        {"any_pattern": rf"{_step('gold-only probe')}[\s\S]*Pages:\n{_FIRST_PAGE}",
         "reply": {"answer": "{line}", "used_urls": ["{url}"], "reasoning": "The first page says so."}},
        {"any_pattern": rf"{_step('gold-plus-noise probe')}[\s\S]*Pages:\n{_LAST_PAGE}",
         "reply": {"answer": "{line}", "used_urls": ["{url}"], "reasoning": "The last page says so."}},
        {"any_pattern": r"\[TrekTrace: (?:gold-only|gold-plus-noise) probe\]",
         "reply": {"answer": "I am not sure.", "used_urls": [], "reasoning": "No page to read."}},
        {"any_pattern": _step("stale reference check"),
         "reply": {"supports_reference": True, "reason": "The gold pages still state the reference."}},
    ]


def _grader_rules() -> list[dict[str, Any]]:
    # each grader's prompt ends with its own field names; the last message is the grader's prompt
    return [
        {"pattern": rf"(?i)Reference answer\(s\), separated by \" \| \": {_FIRST_REF}Answer to grade: {_UNTIL_REF}",
         "reply": "The answer names {ref}.\nverdict: correct"},
        {"pattern": r"Answer to grade: (?:I am not sure|I don't know)",
         "reply": "The answer gives no claim.\nverdict: not_attempted"},
        {"pattern": r"Answer to grade: ", "reply": "The answer does not name the first reference.\nverdict: incorrect"},
        {"pattern": rf"(?i)Accepted answer\(s\), separated by \" \| \": {_FIRST_REF}Response: {_UNTIL_REF}",
         "reply": "The response names {ref}.\nevaluation: correct"},
        {"pattern": r"Accepted answer\(s\), separated by", "reply": "evaluation: incorrect"},
        {"pattern": r"(?i)Reference answer: (?P<ref>[^\n]+)\nCandidate answer: (?:(?!\n\n)[\s\S])*?(?P=ref)",
         "reply": "Yes"},
        {"pattern": r"Reference answer: [^\n]*\nCandidate answer: ", "reply": "No"},
        {"pattern": r"(?i)Gold target: (?P<ref>[^\n]+)\nPredicted answer: (?:(?!\n\n)[\s\S])*?(?P=ref)",
         "reply": "A"},
        {"pattern": r"Predicted answer: (?:I am not sure|I don't know)", "reply": "C"},
        {"pattern": r"Gold target: ", "reply": "B"},
    ]


def _model_rules() -> list[dict[str, Any]]:
    question = r"Question: (?P<q>[^\n]+)"
    first_result = r"\[1\] [^\n]*\n(?:URL: )?\S+\n(?:Date: [^\n]*\n)?(?P<snip>[^\n]+)"
    return [
        # Trek's own agent (trek wild run --search ...): one search, then the first snippet
        {"tool_results": 0, "any_pattern": rf"web_search\(query\)[\s\S]*{question}",
         "tool_calls": [{"name": "web_search", "arguments": {"query": "{q}"}}]},
        # an inspect search task: the same with inspect's tool
        {"tool_results": 0, "any_pattern": rf"Use the search tool[\s\S]*{question}",
         "tool_calls": [{"name": "search", "arguments": {"query": "{q}"}}]},
        {"pattern": first_result, "reply": "{snip}"},
        {"pattern": r"^(?:No results|Search results for)", "reply": "I am not sure."},
        {"any_pattern": r"You cannot call any more tools", "reply": "I am not sure."},
        # closed-book answering (and anything else asked for an answer)
        {"pattern": r"Answer:\s*$", "reply": "I am not sure."},
    ]


def demo_script() -> list[dict[str, Any]]:
    """The rules of the ``demo`` script (module docstring), in the order they are tried."""
    return [*_trace_rules(), *_grader_rules(), *_model_rules()]
