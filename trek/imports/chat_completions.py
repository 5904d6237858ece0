"""``chat-completions``: Chat Completions replies of search models (``web_search_options``).

A record is a ``chat.completion`` object. The answer is ``choices[0].message.content`` (its
``refusal`` when there is no content); its ``annotations`` of type ``url_citation`` (``{"type":
"url_citation", "url_citation": {"url", "title", "start_index", "end_index"}}``) are the
citations; ``usage`` gives the tokens. The format shows nothing else of the search: coverage
is queries ``none`` and results ``cited_only`` (the cited pages are all that is known), no page
text. ``utm_source=openai`` is removed from the URLs. A reply without ``choices`` is an error.
"""

from __future__ import annotations

from trek.imports.common import InputRecord, Parsed, as_dict
from trek.imports.fields import ident, model_name
from trek.imports.openai_responses import usage_of
from trek.pages import strip_openai_tracking
from trek.types import Citation

NAME = "chat-completions"


def parse(rec: InputRecord) -> Parsed:
    data = rec.data
    if not isinstance(data, dict):
        raise rec.fail(f"expected a chat.completion object, got {type(data).__name__}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise rec.fail("field 'choices': the reply has no choice (no message)")
    message = as_dict(as_dict(choices[0]).get("message"))
    if not message:
        raise rec.fail("field 'choices.0.message': missing")
    parsed = Parsed(model=model_name(data.get("model"), "model"), record_id=ident(data.get("id"), "id", required=False), usage=usage_of(data.get("usage")),
                    queries="none", results="cited_only", has_page_text=False)
    content = message.get("content")
    parsed.answer = content if isinstance(content, str) else (message.get("refusal") or None)
    for i, ann in enumerate(message.get("annotations") or [], start=1):
        ann = as_dict(ann)
        if ann.get("type") != "url_citation":
            continue
        cit = as_dict(ann.get("url_citation")) or ann  # some SDK dumps flatten the object
        url = cit.get("url")
        if not isinstance(url, str) or not url:
            raise rec.fail(f"field 'choices.0.message.annotations.{i - 1}.url_citation.url': missing")
        parsed.citations.append(Citation(url=strip_openai_tracking(url), title=str(cit.get("title") or "")))
    parsed.note("Chat Completions shows no search queries and no results beyond the cited pages")
    return parsed
