"""Small asyncio helpers shared by the fan-out loops."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any

__all__ = ["gather_or_cancel"]


async def gather_or_cancel(awaitables: Iterable[Awaitable[Any]]) -> list[Any]:
    """Run all awaitables concurrently; if one fails (or we are cancelled), cancel the rest,
    wait for them to finish, and re-raise. Nothing is left running in the background."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
