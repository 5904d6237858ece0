"""What a fabrication similarity threshold separates, for any embedder (paper D.3: >= 0.90).

The paper keeps a fabricated window only when its ``text-embedding-3-small`` cosine similarity to
the original window is at least 0.90. Another embedder puts the same texts at other similarities,
so the threshold is set per embedder (:func:`default_min_similarity`).

The calibration set (``calibration.json`` beside this module) is ours: eight passages about
fictional people and places (1,100-1,300 characters: shorter than the shortest fabrication window,
1,500, so an edit weighs more here than in a real build), each with three edits of the kind a
fabrication makes (an entity or value substitution, some with the dependent edits it needs) and a
rewrite on the same subject that shares none of its text. Pairs:

``edit``       a passage and its edited copy: a threshold should keep these;
``rewrite``    a passage and its same-subject rewrite: a threshold should reject these;
``unrelated``  two passages of the set about different subjects.

:func:`calibrate` embeds every text once and reports, per kind, the similarities, and at each
threshold asked about the share of edits kept and of rewrites and unrelated pairs rejected.

**The equivalent of 0.90 for another embedder** (:func:`equivalent_threshold`): the threshold at
the same relative position between the embedder's level for unrelated text ``u`` (the median
``unrelated`` similarity on the set) and identity (1): ``u + (0.90 - u_ref) / (1 - u_ref) * (1 - u)``,
where ``u_ref`` is text-embedding-3-small's level for unrelated text. Offline it cannot be
measured; :data:`TE3_SMALL_UNRELATED` is the published figure used until it is
(``trek ctrl calibrate --embeddings openai:text-embedding-3-small`` measures it on this set).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trek.ctrl.common import CtrlError

__all__ = [
    "SET_PATH",
    "PAPER_THRESHOLD",
    "PAPER_EMBEDDER",
    "TE3_SMALL_UNRELATED",
    "CALIBRATED",
    "Pair",
    "Calibration",
    "load_pairs",
    "calibrate",
    "equivalent_threshold",
    "default_min_similarity",
    "parse_thresholds",
    "run_calibration",
]

SET_PATH = Path(__file__).with_name("calibration.json")
PAPER_THRESHOLD = 0.90
PAPER_EMBEDDER = "openai:text-embedding-3-small"
#: text-embedding-3-small's cosine similarity for unrelated short texts, as published (not measured
#: here): 0.196 and 0.248 for two unrelated query/solution pairs in an OpenAI community thread
#: ("Why are similarity scores lower with text-embedding-3-small?", community.openai.com/t/1377685),
#: and about 0.20 for unrelated word pairs ("Jamaica"/"apple", s-anand.net/blog/embeddings-similarity-threshold).
TE3_SMALL_UNRELATED = 0.20
#: Default fabrication thresholds by embedder name (``Embedder.name``): the paper's for its embedder;
#: for wordllama, :func:`equivalent_threshold` of its median unrelated similarity on the set
#: (0.131, ``trek ctrl calibrate``), rounded to two decimals.
CALIBRATED: dict[str, float] = {
    PAPER_EMBEDDER: PAPER_THRESHOLD,
    "wordllama-256": 0.89,
}


def default_min_similarity(embedder_name: str) -> tuple[float, str]:
    """``(threshold, where it comes from)`` for an embedder: :data:`CALIBRATED`, else 0.90."""
    if embedder_name in CALIBRATED:
        why = "the paper's" if embedder_name == PAPER_EMBEDDER else "calibrated (trek ctrl calibrate)"
        return CALIBRATED[embedder_name], f"{why} default for {embedder_name}"
    return PAPER_THRESHOLD, (f"no calibrated threshold for {embedder_name}: the paper's 0.90 for "
                             f"{PAPER_EMBEDDER} (measure yours with `trek ctrl calibrate --embeddings ...`)")


@dataclass(frozen=True)
class Pair:
    kind: str  # "edit", "rewrite" or "unrelated"
    label: str  # e.g. "coach/entity", "coach/rewrite", "coach~ferry"
    a: str
    b: str


def load_pairs(path: str | os.PathLike[str] | None = None) -> list[Pair]:
    """The pairs of the calibration set (every edit applied and checked, see the module doc)."""
    from trek.ctrl.edits import apply_edits

    p = Path(path) if path is not None else SET_PATH
    from trek import jsonio

    try:
        data = jsonio.load_json(p, "calibration set (JSON)")
        passages = data["passages"]
    except ValueError as e:  # a RecordError: names the file
        raise CtrlError(f"not a calibration set: {e}") from None
    except (KeyError, TypeError) as e:
        raise CtrlError(f"{p}: not a calibration set ({type(e).__name__}: {e})") from None
    pairs: list[Pair] = []
    for i, item in enumerate(passages):
        pid = item.get("id") or f"passage {i + 1}"
        try:
            text, rewrite = item["text"], item["rewrite"]
            for j, ed in enumerate(item["edits"]):
                edited = apply_edits(text, ed["replacements"])
                if edited == text:
                    raise CtrlError(f"{p}: {pid} edit {j + 1} changes nothing")
                pairs.append(Pair("edit", f"{pid}/{ed.get('kind', j + 1)}", text, edited))
        except CtrlError:
            raise
        except Exception as e:  # a missing key, a find that is not in the text
            raise CtrlError(f"{p}: {pid}: {e}") from None
        pairs.append(Pair("rewrite", f"{pid}/rewrite", text, rewrite))
    for i, x in enumerate(passages):
        for y in passages[i + 1:]:
            pairs.append(Pair("unrelated", f"{x.get('id')}~{y.get('id')}", x["text"], y["text"]))
    return pairs


def equivalent_threshold(unrelated: float, *, reference_unrelated: float = TE3_SMALL_UNRELATED,
                         reference_threshold: float = PAPER_THRESHOLD) -> float:
    """The threshold at the same relative place between unrelated text and identity as
    ``reference_threshold`` is for the reference embedder (module doc)."""
    if not (reference_unrelated < reference_threshold < 1 and unrelated < 1):
        raise ValueError("need unrelated levels below the reference threshold, and it below 1")
    share = (reference_threshold - reference_unrelated) / (1 - reference_unrelated)
    return unrelated + share * (1 - unrelated)


@dataclass
class Calibration:
    embedder: str
    similarities: dict[str, list[tuple[str, float]]]
    thresholds: list[float]
    reference_unrelated: float
    notes: list[str] = field(default_factory=list)

    def values(self, kind: str) -> list[float]:
        return [s for _, s in self.similarities.get(kind, [])]

    @property
    def unrelated_level(self) -> float:
        return statistics.median(self.values("unrelated"))

    @property
    def equivalent(self) -> float:
        """This embedder's equivalent of the paper's 0.90 (:func:`equivalent_threshold`)."""
        return equivalent_threshold(self.unrelated_level, reference_unrelated=self.reference_unrelated)

    def separation(self, t: float) -> dict[str, Any]:
        """Shares at threshold ``t``: edits kept, rewrites and unrelated pairs rejected."""
        e, r, u = self.values("edit"), self.values("rewrite"), self.values("unrelated")
        return {
            "threshold": t,
            "edits_kept": sum(s >= t for s in e) / len(e),
            "rewrites_rejected": sum(s < t for s in r) / len(r),
            "unrelated_rejected": sum(s < t for s in u) / len(u),
        }

    def separating_interval(self) -> tuple[float, float] | None:
        """``(highest rewrite or unrelated similarity, lowest edit similarity)`` when the set is
        separated (every threshold strictly above the first and at most the second separates it)."""
        low = max(self.values("rewrite") + self.values("unrelated"))
        high = min(self.values("edit"))
        return (low, high) if low < high else None

    def table(self) -> list[dict[str, Any]]:
        rows = []
        for kind in ("edit", "rewrite", "unrelated"):
            v = self.values(kind)
            rows.append({"pairs": kind, "n": len(v), "min": min(v), "median": statistics.median(v), "max": max(v)})
        return rows

    def report(self) -> str:
        lines = [f"embedder {self.embedder}: cosine similarity on the calibration set ({SET_PATH.name})"]
        lines.append(f"  {'pairs':<10} {'n':>4} {'min':>7} {'median':>7} {'max':>7}")
        for r in self.table():
            lines.append(f"  {r['pairs']:<10} {r['n']:>4} {r['min']:>7.3f} {r['median']:>7.3f} {r['max']:>7.3f}")
        gap = self.separating_interval()
        lines.append("  separated by any threshold in "
                     + (f"({gap[0]:.3f}, {gap[1]:.3f}]" if gap else "no interval: the kinds overlap"))
        for t in self.thresholds:
            s = self.separation(t)
            lines.append(f"  at {t:.2f}: keeps {s['edits_kept']:.0%} of edits, rejects {s['rewrites_rejected']:.0%} "
                         f"of rewrites and {s['unrelated_rejected']:.0%} of unrelated pairs")
        lines.append(f"  equivalent of {PAPER_EMBEDDER}'s {PAPER_THRESHOLD:.2f}: {self.equivalent:.3f} "
                     f"(unrelated level {self.unrelated_level:.3f} here; {self.reference_unrelated:.3f} for "
                     f"{PAPER_EMBEDDER})")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "embedder": self.embedder,
            "table": self.table(),
            "separating_interval": self.separating_interval(),
            "separation": [self.separation(t) for t in self.thresholds],
            "unrelated_level": self.unrelated_level,
            "reference_unrelated": self.reference_unrelated,
            "equivalent": self.equivalent,
            "pairs": {k: [{"pair": label, "similarity": s} for label, s in v] for k, v in self.similarities.items()},
            "notes": self.notes,
        }


def _cosines(vectors: np.ndarray, index: dict[str, int], pairs: Sequence[Pair]) -> list[float]:
    norms = np.linalg.norm(vectors, axis=1)
    out = []
    for p in pairs:
        i, j = index[p.a], index[p.b]
        d = norms[i] * norms[j]
        out.append(float(vectors[i] @ vectors[j] / d) if d else 0.0)
    return out


def calibrate(embedder: Any, thresholds: Sequence[float] = (PAPER_THRESHOLD,), *,
              pairs: Sequence[Pair] | None = None, reference_unrelated: float | None = None) -> Calibration:
    """Embed the set with ``embedder`` (one call over the distinct texts) and measure it.

    ``reference_unrelated``: text-embedding-3-small's unrelated level; by default the published
    :data:`TE3_SMALL_UNRELATED`, or the measured one when ``embedder`` is text-embedding-3-small.
    """
    ps = list(pairs) if pairs is not None else load_pairs()
    texts = list(dict.fromkeys(t for p in ps for t in (p.a, p.b)))
    index = {t: i for i, t in enumerate(texts)}
    vectors = np.asarray(embedder.embed(texts), dtype=np.float64)
    sims = _cosines(vectors, index, ps)
    by_kind: dict[str, list[tuple[str, float]]] = {}
    for p, s in zip(ps, sims, strict=True):
        by_kind.setdefault(p.kind, []).append((p.label, s))
    missing = [k for k in ("edit", "rewrite", "unrelated") if k not in by_kind]
    if missing:
        raise CtrlError(f"the calibration set has no {', '.join(missing)} pairs")
    name = getattr(embedder, "name", type(embedder).__name__)
    notes = []
    if reference_unrelated is None:
        if name == PAPER_EMBEDDER:
            reference_unrelated = statistics.median(s for _, s in by_kind["unrelated"])
            notes.append(f"{PAPER_EMBEDDER}'s unrelated level measured here; pass it to other embedders' "
                         f"calibration with --reference-unrelated {reference_unrelated:.3f}")
        else:
            reference_unrelated = TE3_SMALL_UNRELATED
            notes.append(f"{PAPER_EMBEDDER}'s unrelated level is the published {TE3_SMALL_UNRELATED:.2f} "
                         "(not measured here)")
    return Calibration(name, by_kind, list(thresholds), reference_unrelated, notes)


def parse_thresholds(text: str) -> list[float]:
    """``--thresholds 0.85,0.9``: numbers in (0, 1] separated by commas (else a ValueError naming the flag)."""
    try:
        ts = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--thresholds: numbers separated by commas, got {text!r}") from None
    if not ts or any(not 0 < t <= 1 for t in ts):
        raise ValueError(f"--thresholds: each in (0, 1], got {text!r}")
    return ts


def run_calibration(embedder: Any, thresholds: str | Sequence[float], *, reference_unrelated: float | None = None,
                    set_file: str | os.PathLike[str] | None = None, json_out: str | os.PathLike[str] | None = None,
                    force: bool = False) -> list[str]:
    """``trek ctrl calibrate``: calibrate the embedder role ``embedder`` (a :class:`trek.roles.Role`)
    on the set (``set_file``, default the bundled one) at ``thresholds``, write every pair's
    similarity to ``json_out`` when given (refusing a file that is not a calibration unless
    ``force``), and return the lines to print."""
    import json

    from trek.embeddings import make_embedder
    from trek.outputs import atomic_write, check_out
    from trek.runs import CALIBRATION_REPORT

    ts = parse_thresholds(thresholds) if isinstance(thresholds, str) else list(thresholds)
    if reference_unrelated is not None and not -1 <= reference_unrelated < PAPER_THRESHOLD:
        raise ValueError(f"--reference-unrelated must be below {PAPER_THRESHOLD}, got {reference_unrelated}")
    if json_out is not None:
        check_out(json_out, reads=[set_file], example=CALIBRATION_REPORT, owner=b'{\n  "embedder": ',
                  command="trek ctrl calibrate", force=force)
    pairs = load_pairs(set_file)
    emb = make_embedder(embedder.model, base_url=embedder.base_url)
    result = calibrate(emb, ts, pairs=pairs, reference_unrelated=reference_unrelated)
    default, why = default_min_similarity(result.embedder)
    lines = [result.report(), f"  default threshold for {result.embedder}: {default:.2f} ({why})"]
    if json_out is not None:
        atomic_write(Path(json_out), json.dumps(result.as_dict(), indent=2) + "\n")
        lines.append(f"wrote {json_out}")
    return lines
