"""The spend ledger: what an output has cost over every invocation, and the budget it may not pass.

A :class:`SpendLedger` is shared by every client a command spends through (the evaluated model,
a proxy search model, the judges). Before a fresh call is sent the client *reserves* its
worst-case price (:meth:`SpendLedger.reserve`); when the call ends it *settles* the reservation
with the dollars the reply actually cost (0 for a call that failed: providers do not bill an
error). So, with a budget:

* a call is sent only while ``spent + reserved + worst case <= budget``: concurrent calls never
  push the total past the budget, whatever order they finish in;
* a call whose worst case does not fit even when nothing else is in flight (``spent + worst
  case > budget``) is refused at once: the item is left pending with the reason;
* otherwise a call that does not fit *now* waits for calls in flight to settle (their actual
  price is usually far below their worst case), so reservations never starve a run that has room.

With a ``path`` the ledger is durable: an append-only file of JSON lines, one when a call is
reserved (``{"reserve": id, "usd": worst, "model": ...}``) and one when it settles
(``{"settle": id, "usd": actual}``), each written with a single ``write`` before the call is
sent or its result used. Opening the ledger again (a resumed run) starts from the total of the
file: the settled dollars plus the worst case of every reservation that never settled (a process
killed with calls in flight may have been billed for them; they count at their worst case, which
errs on the safe side). A ``kill -9`` cannot lose a line the kernel accepted; a power cut can
tear the last line, which is then ignored. The file is created with the first priced fresh call,
so a run served from the cache, or on a model without a price, writes none.

The worst case of a call is its prompt tokens (o200k_base in OpenAI's chat format, times 1.25
for other models' tokenizers: :data:`trek.llm.estimate.OTHER_TOKENIZER_BAND`) at the input price
plus its output cap (``max_tokens`` / ``max_completion_tokens`` / ``max_output_tokens``) at the
output price, or the client's ``assume_output`` tokens (default 4,096, ``--assume-output``) for
a request that sends no cap (:meth:`trek.llm.client.LLMClient.worst_cost`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import os
import secrets
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trek.types import RecordError

__all__ = ["DEFAULT_ASSUME_OUTPUT", "OverBudget", "Reservation", "SpendLedger", "check_budget", "ledger_path",
           "read_ledger", "spending"]

#: Output tokens assumed for a request that sends no output cap (the worst case of its price).
DEFAULT_ASSUME_OUTPUT = 4096


def check_budget(budget_usd: float | None) -> float | None:
    """``budget_usd`` when it is a finite number of dollars >= 0 (or ``None``); else ``ValueError``."""
    if budget_usd is None:
        return None
    if isinstance(budget_usd, bool) or not isinstance(budget_usd, int | float) or not math.isfinite(budget_usd) \
            or budget_usd < 0:
        raise ValueError(f"budget must be a finite, non-negative number of US dollars, not {budget_usd!r}")
    return float(budget_usd)


def ledger_path(output: str | os.PathLike[str]) -> Path:
    """The spend ledger of an output file: ``.<name>.spend`` beside it (``RUN_DIR/.answers.jsonl.spend``)."""
    p = Path(output)
    return p.with_name(f".{p.name}.spend")


class OverBudget(Exception):
    """A call was not sent: its worst-case price does not fit in what is left of the budget."""


@dataclass
class Reservation:
    """One call's hold on the budget, from before it is sent until it settles."""

    id: str
    usd: float
    settled: bool = False


def read_ledger(path: str | os.PathLike[str]) -> float:
    """The dollars a ledger file records: settled calls plus the worst case of the calls that
    never settled. ``0.0`` when the file does not exist; :class:`~trek.types.RecordError`
    naming the line for a malformed one (a torn last line is ignored)."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return 0.0
    except OSError as e:
        raise RecordError(p, None, f"the spend ledger cannot be read ({e.strerror})") from None
    lines = text.split("\n")
    open_: dict[str, float] = {}
    settled = 0.0
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            usd = float(obj["usd"])
            if not math.isfinite(usd) or usd < 0:
                raise ValueError("usd must be a non-negative number")
            if "reserve" in obj:
                open_[str(obj["reserve"])] = usd
            elif "settle" in obj:
                open_.pop(str(obj["settle"]), None)
                settled += usd
            elif "spent" in obj:  # dollars recorded without a reservation (e.g. a Batch API result)
                settled += usd
            else:
                raise ValueError("neither reserve, settle nor spent")
        except (ValueError, KeyError, TypeError) as e:
            if i == len(lines) and not text.endswith("\n"):  # the torn end of an interrupted write
                break
            raise RecordError(p, i, f"not a spend ledger line ({e}); fix or delete the file") from None
    return settled + sum(open_.values())


class SpendLedger:
    """Dollars spent against one budget by any number of clients (see the module docstring).

    ``path``: the ledger file (``None``: this process only); ``budget_usd``: the ceiling on the
    ledger's total (``None``: record only).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, budget_usd: float | None = None):
        self.budget_usd = check_budget(budget_usd)
        self.path = Path(path) if path is not None else None
        #: Dollars recorded by earlier invocations (the file's total when the ledger was opened).
        self.before_usd = read_ledger(self.path) if self.path is not None else 0.0
        self.spent_usd = 0.0  # settled in this process
        self.reserved_usd = 0.0  # held by calls in flight
        self.in_flight = 0  # reservations not settled yet
        self.refused = 0  # calls not sent for the budget
        self._lock = threading.Lock()
        self._waiters: list[asyncio.Future[None]] = []
        self._fd: int | None = None
        self._tag = secrets.token_hex(4)
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        return (f"SpendLedger(path={str(self.path) if self.path else None!r}, budget_usd={self.budget_usd}, "
                f"total_usd={self.total_usd:.6f})")

    @property
    def total_usd(self) -> float:
        """Dollars recorded so far: earlier invocations plus the calls settled now."""
        return self.before_usd + self.spent_usd

    @property
    def left_usd(self) -> float | None:
        """What is left of the budget (``None`` without one)."""
        return None if self.budget_usd is None else max(0.0, self.budget_usd - self.total_usd)

    def describe(self) -> str:
        """One line for a command: the budget, what earlier invocations spent, what is left."""
        where = f" (ledger {self.path})" if self.path is not None else ""
        if self.budget_usd is None:
            return f"spent so far: ${self.total_usd:.4f}{where}"
        return (f"budget ${self.budget_usd:.4f}: ${self.before_usd:.4f} spent by earlier invocations, "
                f"${self.left_usd:.4f} left{where}")

    # -- reserve and settle --------------------------------------------------------------------
    def _refusal(self, worst: float) -> str:
        assert self.budget_usd is not None
        earlier = f", ${self.before_usd:.4f} of it in earlier runs" if self.before_usd else ""
        where = f" (recorded in {self.path})" if self.path is not None else ""
        return (f"budget cap ${self.budget_usd:.4f} reached (spent ${self.total_usd:.4f}{earlier}{where}; the next "
                f"call may cost up to ${worst:.4f}); raise the budget and run again to continue")

    async def reserve(self, worst_usd: float, model: str | None = None) -> Reservation:
        """Hold ``worst_usd`` for a call about to be sent (waiting while calls in flight hold
        the room it needs); raises :class:`OverBudget` when it cannot fit."""
        worst = max(0.0, float(worst_usd))
        while True:
            with self._lock:
                if self.budget_usd is not None:
                    if self.total_usd + worst > self.budget_usd:
                        self.refused += 1
                        raise OverBudget(self._refusal(worst))
                    wait = self.in_flight > 0 and self.total_usd + self.reserved_usd + worst > self.budget_usd
                else:
                    wait = False
                if not wait:
                    r = Reservation(f"{self._tag}-{next(self._ids)}", worst)
                    self.reserved_usd += worst
                    self.in_flight += 1
                    self._append({"reserve": r.id, "usd": worst, "model": model, "t": round(time.time(), 3)})
                    return r
                fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._waiters.append(fut)
            try:
                await fut
            finally:
                with self._lock:
                    if fut in self._waiters:
                        self._waiters.remove(fut)

    def settle(self, r: Reservation, actual_usd: float) -> None:
        """End ``r``'s hold: the call cost ``actual_usd`` (0 for a call that was not billed)."""
        with self._lock:
            if r.settled:
                return
            r.settled = True
            actual = max(0.0, float(actual_usd))
            self.in_flight -= 1
            self.reserved_usd = max(0.0, self.reserved_usd - r.usd) if self.in_flight else 0.0
            self.spent_usd += actual
            self._append({"settle": r.id, "usd": actual})
            waiters, self._waiters = self._waiters, []
        for fut in waiters:  # every waiter checks again (one may fit where another does not)
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits any more
                fut.get_loop().call_soon_threadsafe(_wake, fut)

    def record(self, usd: float, model: str | None = None) -> None:
        """Add dollars spent without a reservation (Batch API results loaded into the cache)."""
        with self._lock:
            self.spent_usd += max(0.0, float(usd))
            self._append({"spent": "batch", "usd": max(0.0, float(usd)), "model": model})

    # -- the file ------------------------------------------------------------------------------
    def _append(self, obj: dict[str, Any]) -> None:
        if self.path is None:
            return
        if self._fd is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            except OSError as e:
                raise RecordError(self.path, None, f"cannot write the spend ledger ({e.strerror})") from None
        os.write(self._fd, (json.dumps(obj, separators=(",", ":")) + "\n").encode("utf-8"))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


@contextlib.contextmanager
def spending(
    clients: Iterable[Any], path: str | os.PathLike[str] | None, budget_usd: float | None = None,
) -> Iterator[SpendLedger]:
    """Give ``clients`` one :class:`SpendLedger` at ``path`` for the block, then take it back.

    The budget is ``budget_usd``, else the smallest ``budget_usd`` the clients were made with
    (``None``: record only). When one of the clients already holds a durable ledger (an outer
    command's, e.g. ``trek ctrl run`` grading with its judge inside the grid's ledger), that one
    is kept and given to the others: an outer ledger wins. ``None`` clients are ignored.
    """
    unique = list({id(c): c for c in clients if c is not None}.values())
    outer = next((c.ledger for c in unique if getattr(c, "ledger", None) is not None
                  and c.ledger.path is not None), None)
    if outer is not None:
        ledger, own = outer, False
    else:
        if budget_usd is None:
            budgets = [c.budget_usd for c in unique if getattr(c, "budget_usd", None) is not None]
            budget_usd = min(budgets) if budgets else None
        ledger, own = SpendLedger(path, budget_usd), True
    previous = [(c, c.ledger) for c in unique]
    for c in unique:
        c.ledger = ledger
    try:
        yield ledger
    finally:
        for c, old in previous:
            c.ledger = old
        if own:
            ledger.close()
