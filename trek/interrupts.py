"""SIGTERM handled like Ctrl-C.

A long command stopped by ``kill PID``, a container stop, a CI timeout or a job scheduler gets
SIGTERM, not SIGINT. :func:`terminate_as_interrupt` makes SIGTERM raise
:class:`KeyboardInterrupt` in the main thread, exactly as Ctrl-C does, so the same cleanup runs:
staged output folders are removed, atomic writes leave the previous file, record journals keep
whole lines, caches commit what they hold, child servers are stopped. ``trek`` installs it
before every command (the root callback of :mod:`trek.cli`).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

__all__ = ["terminate_as_interrupt"]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"stopped by signal {signal.Signals(signum).name}")


def terminate_as_interrupt() -> bool:
    """Make SIGTERM raise :class:`KeyboardInterrupt` (as SIGINT does); only from the main thread
    and when SIGTERM still has its default action (a handler someone installed is kept). Returns
    whether it was installed."""
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return False
        signal.signal(signal.SIGTERM, _interrupt)
    except (ValueError, OSError, AttributeError):  # no signals here (an embedded interpreter)
        return False
    return True
