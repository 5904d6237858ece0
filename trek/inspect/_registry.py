"""What inspect_ai loads through the ``inspect_ai`` entry point: every ``trek/...`` component."""

from trek.inspect.scorers import grade, trektrace
from trek.inspect.tasks import ctrl, ctrl_method, mini, wild
from trek.inspect.tools import search

__all__ = ["ctrl", "ctrl_method", "grade", "mini", "search", "trektrace", "wild"]
