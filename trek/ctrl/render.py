"""The exact context text given to models (paper D.4).

Each document is rendered as its 1-based index, its displayed date when known, its source URL only
where the condition shows URLs, and its text; documents are separated by a blank line. The three
pieces are named templates (``ctrl.render.document``, ``ctrl.render.date``, ``ctrl.render.url``)
that a prompts folder can override.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trek.templates import register, template, template_version

__all__ = ["VERSION", "DOCUMENT_TEMPLATE", "DATE_LINE", "URL_LINE", "Renderer", "Shown"]

VERSION = "ctrl.render/1"
DOCUMENT_TEMPLATE = register("ctrl.render.document", "[Document {index}]\n{meta}{text}")
DATE_LINE = register("ctrl.render.date", "Date: {date}\n")
URL_LINE = register("ctrl.render.url", "Source URL: {url}\n")
SEPARATOR = "\n\n"


@dataclass(frozen=True, slots=True)
class Shown:
    """One document as displayed: the date and URL shown (None when unknown or hidden) and text."""

    date: str | None
    url: str | None
    text: str


class Renderer:
    """Renders documents with the templates in force when it was created (read once per build)."""

    def __init__(self) -> None:
        self.document = template("ctrl.render.document", DOCUMENT_TEMPLATE)
        self.date_line = template("ctrl.render.date", DATE_LINE)
        self.url_line = template("ctrl.render.url", URL_LINE)

    @staticmethod
    def versions() -> dict[str, str]:
        return {
            "ctrl.render.document": template_version("ctrl.render.document", DOCUMENT_TEMPLATE, VERSION),
            "ctrl.render.date": template_version("ctrl.render.date", DATE_LINE, VERSION),
            "ctrl.render.url": template_version("ctrl.render.url", URL_LINE, VERSION),
        }

    def render(self, docs: Sequence[Shown]) -> str:
        parts = []
        for i, d in enumerate(docs, start=1):
            meta = ""
            if d.date is not None:
                meta += self.date_line.format(date=d.date)
            if d.url is not None:
                meta += self.url_line.format(url=d.url)
            parts.append(self.document.format(index=i, meta=meta, text=d.text.strip()))
        return SEPARATOR.join(parts)
