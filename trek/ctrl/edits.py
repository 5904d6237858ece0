"""Exact text edits of a fabricated passage, and the rejection a failed check raises: shared by the
fabricator (:mod:`trek.ctrl.fabrication`) and the threshold calibration (:mod:`trek.ctrl.calibration`),
which import this module and not each other."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Rejection", "apply_edits"]


class Rejection(Exception):
    """A candidate that failed a check: ``kind`` is a stable label, ``message`` the detail."""

    KINDS = (
        "span_not_found",
        "no_span",
        "span_not_found_in_window",
        "non_unique_span",
        "overlapping_edits",
        "no_change",
        "same_answer",
        "repeated_answer",
        "empty_answer",
        "low_similarity",
        "verifier_rejected",
        "unparsed",
        "unfit_value",
        "names_reference",
    )

    def __init__(self, kind: str, message: str):
        assert kind in self.KINDS, kind
        self.kind = kind
        self.message = message
        super().__init__(f"{kind}: {message}")

    @property
    def feedback(self) -> str:
        return f"{self.kind} ({self.message})"


def apply_edits(window: str, replacements: Sequence[dict[str, str]]) -> str:
    """Apply exact replacements; raises :class:`Rejection` for missing, repeated or overlapping finds."""
    spans = []
    for i, r in enumerate(replacements):
        find = r.get("find")
        if not isinstance(find, str) or not find:
            raise Rejection("span_not_found_in_window", f"replacement {i + 1} has an empty 'find'")
        count = window.count(find)
        if count == 0:
            raise Rejection("span_not_found_in_window", f"replacement {i + 1}: {find[:80]!r} is not in the passage")
        if count > 1:
            raise Rejection(
                "non_unique_span", f"replacement {i + 1}: {find[:80]!r} occurs {count} times; quote more context"
            )
        start = window.index(find)
        spans.append((start, start + len(find), str(r.get("replace", ""))))
    spans.sort()
    for (_, e1, _), (s2, _, _) in zip(spans, spans[1:], strict=False):
        if s2 < e1:
            raise Rejection("overlapping_edits", "two replacements overlap")
    out, pos = [], 0
    for s, e, new in spans:
        out.append(window[pos:s])
        out.append(new)
        pos = e
    out.append(window[pos:])
    return "".join(out)
