"""What ``trek ctrl build --model`` (fabrication) and ``trek ctrl discover`` would cost, before they run.

Both build each question's *first* model request with the real code (the fabrication or the
discovery of one pool driving a :class:`~trek.llm.estimate.RecordingClient`, which sends
nothing: the pool stops at its first call, before any search, page fetch or embedding) and
hand them to :func:`~trek.llm.estimate.estimate_requests` with an
:class:`~trek.llm.estimate.Assumption` of how that first call grows into the question's cost:

* **fabrication**: per question, ``target`` slots, each 1 to ``max_attempts`` attempts of an edit
  and a verify call, plus a locate call per attempt at most: ``2 * target`` to
  ``3 * target * max_attempts`` calls, each reading about what the first call reads (the gold
  document or the window cut from it);
* **discovery**: per question, 1 to ``temporal_rounds + relevance_rounds`` query calls and 0 to
  ``2 * max_verifications`` verify calls, each of which may read up to ``page_chars``
  characters of a page (~ ``page_chars / 4`` tokens) on top of the first call's prompt; and up to
  ``queries_per_round`` searches a round.

Re-asks of an unreadable reply are not counted. A question whose first call is in the cache is
counted as done: it replays from the cache (a question stopped half-way, e.g. by the budget,
is then under-counted; the budget still caps what is spent).
"""

from __future__ import annotations

from collections.abc import Sequence

from trek.aio import run_sync
from trek.ctrl.discovery import DiscoverySettings, adiscover_pools
from trek.ctrl.fabrication import FabricationSettings, afabricate_pools
from trek.ctrl.pools import Pool
from trek.llm.client import LLMClient
from trek.llm.estimate import Assumption, Estimate, RecordingClient, estimate_requests
from trek.pages import PageStore
from trek.search.base import SearchBackend

__all__ = ["estimate_discovery", "estimate_fabrication"]


class _NoEmbedder:
    """Stands in for the embedder in a dry run: the first call of a pool comes before any embedding."""

    name = "dry-run"

    def embed(self, texts):  # pragma: no cover - never reached before the first (recorded) call
        raise RuntimeError("a dry run embeds nothing")


def estimate_fabrication(pools: Sequence[Pool], client: LLMClient, settings: FabricationSettings | None = None,
                         *, assume_output: int = 4096) -> Estimate:
    """The estimate of fabricating ``pools`` with ``client`` (``trek ctrl build --model --dry-run``)."""
    s = settings or FabricationSettings()
    rec = RecordingClient(client)
    todo = [p for p in pools if p.gold]
    if todo and s.target:
        run_sync(afabricate_pools(todo, rec, _NoEmbedder(), s))  # type: ignore[arg-type]
    a = Assumption(
        description=f"{s.target} fabrication slots per question, each 1 to {s.max_attempts} attempts of an edit and a "
                    f"verify call plus at most one locate call ({2 * s.target} to {3 * s.target * s.max_attempts} "
                    "calls), each reading about what the first call reads",
        calls_low=2 * s.target, calls_high=3 * s.target * s.max_attempts,
    )
    est = estimate_requests(rec.recorded, client, label="trek ctrl build (fabrication)", assumption=a,
                            assume_output=assume_output)
    est.items = len(pools)
    est.cached_items += len(pools) - len(rec.recorded)
    return est


class _NoSearch:
    """Stands in for the search backend in a dry run (same name; nothing is searched)."""

    def __init__(self, real: SearchBackend):
        self.name = real.name

    async def acall(self, query: str, k: int | None = None):  # pragma: no cover - after the first call
        raise RuntimeError("a dry run searches nothing")


def estimate_discovery(pools: Sequence[Pool], client: LLMClient, backend: SearchBackend, store: PageStore,
                       settings: DiscoverySettings | None = None, *, assume_output: int = 4096) -> Estimate:
    """The estimate of discovering distractors for ``pools`` (``trek ctrl discover --dry-run``)."""
    s = settings or DiscoverySettings()
    rec = RecordingClient(client)
    run_sync(adiscover_pools(list(pools), rec, _NoSearch(backend), store, s))  # type: ignore[arg-type]
    rounds = s.temporal_rounds + s.relevance_rounds
    verifies = 2 * s.max_verifications
    page_tokens = s.page_chars // 4
    a = Assumption(
        description=f"1 to {rounds} query calls and 0 to {verifies} verify calls per question (up to "
                    f"{s.max_verifications} pages checked per kind), each reading up to {s.page_chars:,} characters "
                    f"of a page (~{page_tokens:,} tokens) more than the first; up to {s.queries_per_round} searches "
                    "a round",
        calls_low=1, calls_high=rounds + verifies, extra_input=(0, page_tokens),
        search_low=0, search_high=rounds * s.queries_per_round, search_backend=backend.name,
    )
    est = estimate_requests(rec.recorded, client, label="trek ctrl discover", assumption=a,
                            assume_output=assume_output)
    est.items = len(pools)
    est.cached_items += len(pools) - len(rec.recorded)
    return est
