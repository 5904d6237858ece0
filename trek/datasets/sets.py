"""The question sets Trek answers, loaded by name: one loader for TrekBench-Mini and -Wild.

``load_benchmark("mini")`` is the bundled demo (questions and their documents);
``load_benchmark("wild")`` is TrekBench-Wild selected from the source datasets. Commands, the
Ctrl pools and the experiments all load them here, so ``data_dir`` means the same everywhere:
the folder the set is read from (Mini: its folder, default ``$TREK_MINI_DIR`` or the bundled
``data/mini``; Wild: the source datasets, default ``$TREK_DATA_DIR`` or ``./datasets``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trek.datasets.mini import MiniBenchmark
    from trek.datasets.wild import WildBenchmark
    from trek.types import Question

__all__ = ["QUESTION_SETS", "load_benchmark", "load_questions"]

#: The names :func:`load_benchmark` knows.
QUESTION_SETS = ("wild", "mini")


def load_benchmark(source: str, data_dir: str | os.PathLike[str] | None = None, *,
                   strict: bool = True) -> MiniBenchmark | WildBenchmark:
    """The question set ``source`` (``"mini"`` or ``"wild"``) read from ``data_dir`` (see the
    module doc). ``strict=False`` skips unreadable source rows of Wild and lists them in its
    reports instead of stopping (Mini is always read strictly)."""
    if source == "mini":
        from trek.datasets import mini

        return mini.load(data_dir)
    if source == "wild":
        from trek.datasets import wild

        return wild.load(data_dir, strict=strict)
    raise ValueError(f"unknown question set {source!r}: use {' or '.join(QUESTION_SETS)}")


def load_questions(source: str, data_dir: str | os.PathLike[str] | None = None) -> list[Question]:
    """The questions of :func:`load_benchmark` ``(source, data_dir)``, in file order."""
    return list(load_benchmark(source, data_dir).questions)
