"""TrekBench-Wild by search configuration: Table 5 (accuracy per model and search backend) and
Table 6 (a model's native search against the same search through a proxy model).

``tab5_search_configurations``  :func:`discover_runs`, :func:`search_configurations`, :func:`search_note`
``tab6_native_vs_proxy``        :func:`native_vs_proxy`, :func:`search_note`

A run's configuration is read from its ``run.json``: the evaluated ``model`` and
``config.system.search`` (``none``, ``local``, ``tavily``, ``duckduckgo``, ``openai``,
``proxy:MODEL``; imported runs name what their log says). A model's **native** search is its own
provider's hosted search tool (:data:`NATIVE_SEARCH`: ``openai``, and the names imported logs
give it); a **proxy** search is ``proxy:MODEL``, another model running its hosted search for the
evaluated one (paper B.3). With runs of neither kind the tables are empty and :func:`search_note`
says "no runs of this kind recorded".
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from trek import runs as _runs
from trek.analysis import accuracy_by_dataset, paired_comparisons
from trek.report.wild import WILD_DATASETS, discover_runs

__all__ = [
    "NATIVE_SEARCH",
    "discover_runs",
    "run_configuration",
    "search_configurations",
    "native_vs_proxy",
    "search_note",
]

#: The search names that are a model's own hosted search tool (Table 6's "native").
NATIVE_SEARCH = ("openai", "native", "gemini", "google")


def run_configuration(run_dir: str | os.PathLike[str]) -> dict[str, str]:
    """``{"model", "system", "search"}`` of one run, from its ``run.json`` (``?`` where it says
    nothing; a run without search is ``none``)."""
    meta = _runs.read_meta(Path(run_dir))
    system = meta.config.get("system") if meta is not None else None
    system = system if isinstance(system, dict) else {}
    search = system.get("search")
    return {"model": str(meta.model) if meta is not None and meta.model else "?",
            "system": str(system.get("system") or "?"),
            "search": str(search) if search not in (None, "") else "none"}


def _accuracy_row(run_dir: Path, datasets: tuple[str, ...]) -> dict[str, float]:
    t = accuracy_by_dataset(run_dir, ci=False)
    row = {ds: float(t.at[ds, "accuracy"]) if ds in t.index else np.nan for ds in (*datasets, "micro", "macro")}
    row["n"] = int(t.at["micro", "n"])
    return row


def search_configurations(runs: dict[str, Path], datasets: tuple[str, ...] = WILD_DATASETS) -> pd.DataFrame:
    """Table 5: accuracy (%) per dataset, micro and macro, one row per run, indexed by
    ``(model, search, system)`` (sorted; the run's label when two runs share all three)."""
    rows: dict[tuple[str, str, str], dict[str, float]] = {}
    for label, d in runs.items():
        cfg = run_configuration(d)
        key = (cfg["model"], cfg["search"], cfg["system"])
        if key in rows:
            key = (cfg["model"], cfg["search"], f"{cfg['system']} ({label})")
        rows[key] = _accuracy_row(Path(d), datasets)
    columns = [*datasets, "micro", "macro", "n"]
    index = pd.MultiIndex.from_tuples(sorted(rows), names=["model", "search", "system"]) if rows else \
        pd.MultiIndex.from_tuples([], names=["model", "search", "system"])
    out = pd.DataFrame([rows[k] for k in index], index=index, columns=columns)
    out["n"] = out["n"].astype(int)
    return out.round(1)


def _correct(run_dir: Path) -> pd.Series:
    df = _runs.frame(run_dir, ["question_id", "correct"])
    return df.set_index("question_id")["correct"].astype(float)


def native_vs_proxy(runs: dict[str, Path], native: tuple[str, ...] = NATIVE_SEARCH) -> pd.DataFrame:
    """Table 6: per model and system with a native-search run and a proxy-search run, their
    accuracy (%) on the questions both answered, the change from native to proxy in points
    (``delta_pp``: proxy minus native), the discordant pairs ``b`` (native right, proxy wrong) and
    ``c``, and the exact McNemar ``p`` (:func:`trek.analysis.paired_comparisons`). One row per
    (model, system, proxy); empty when no model has both kinds."""
    by: dict[tuple[str, str], dict[str, list[tuple[str, Path]]]] = {}
    for d in runs.values():
        cfg = run_configuration(d)
        kind = "native" if cfg["search"] in native else ("proxy" if cfg["search"].startswith("proxy:") else None)
        if kind:
            by.setdefault((cfg["model"], cfg["system"]), {}).setdefault(kind, []).append((cfg["search"], Path(d)))
    rows = []
    for (model, system), kinds in sorted(by.items()):
        for nat_name, nat_dir in kinds.get("native", []):
            for prox_name, prox_dir in kinds.get("proxy", []):
                table = pd.concat({"native": _correct(nat_dir), "proxy": _correct(prox_dir)}, axis=1)
                cmp = paired_comparisons(table, "native", ["proxy"]).loc["proxy"]
                rows.append({"model": model, "system": system, "native": nat_name, "proxy": prox_name,
                             "n": int(cmp["n"]), "acc_native": cmp["acc_ref"], "acc_proxy": cmp["acc_cond"],
                             "delta_pp": cmp["delta_pp"], "b": int(cmp["b"]), "c": int(cmp["c"]), "p": cmp["p"]})
    cols = ["model", "system", "native", "proxy", "n", "acc_native", "acc_proxy", "delta_pp", "b", "c", "p"]
    out = pd.DataFrame(rows, columns=cols).set_index(["model", "system", "native", "proxy"])
    return out.round({"acc_native": 1, "acc_proxy": 1, "delta_pp": 1, "p": 4})


def search_note(table: pd.DataFrame, kind: str) -> str:
    """A line for the notebook: how many rows the table holds, or that there are no runs of its kind."""
    if table.empty:
        return f"no runs of this kind recorded ({kind}); give runs of it in the notebook's params"
    return f"{len(table)} row(s): {kind}"
