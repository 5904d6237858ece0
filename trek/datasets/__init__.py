"""Loaders for the source datasets of TrekBench-Wild and TrekBench-Ctrl.

Each loader reads a source file in its own format and returns ``(questions, report)``
(a :class:`~trek.datasets.common.LoadResult`); LongSeal also returns documents. See
:mod:`trek.datasets.wild` for the TrekBench-Wild selection and :mod:`trek.datasets.download` for
fetching the files at pinned versions. :func:`load_benchmark` / :func:`load_questions` load a
question set (``"mini"`` or ``"wild"``) by name.
"""

from trek.datasets.common import (
    DatasetError,
    LoadReport,
    LoadResult,
    LongSealResult,
    MissingDataError,
    SkippedRow,
    default_data_dir,
)
from trek.datasets.freshqa import load_freshqa
from trek.datasets.infodeepseek import load_infodeepseek
from trek.datasets.longseal import load_longseal
from trek.datasets.sealqa import load_sealqa
from trek.datasets.sets import QUESTION_SETS, load_benchmark, load_questions

__all__ = [
    "DatasetError",
    "LoadReport",
    "LoadResult",
    "LongSealResult",
    "MissingDataError",
    "QUESTION_SETS",
    "SkippedRow",
    "default_data_dir",
    "load_benchmark",
    "load_freshqa",
    "load_infodeepseek",
    "load_longseal",
    "load_questions",
    "load_sealqa",
]
