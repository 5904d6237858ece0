"""A scripted web for Wild-shaped Ctrl discovery: source datasets, pages, a search service, replies.

A script, not part of the package (it drives :mod:`trek.testing`); the Ctrl discovery tests and
``benchmarks/ctrl_wild.py`` use it. Everything is invented: fictional rowing clubs, coaches and
``*.example`` or loopback URLs; no row of a real dataset.

:class:`WildWeb` starts one aiohttp server on loopback that serves

* ``GET /q<i>/...``: HTML pages (gold, historical, relevance) whose text, title and date reach
  Trek through a real HTTP fetch and trafilatura. Dates come in every shape a page has them: a
  ``<meta>`` tag, the URL path, a full date in the text, or none that trafilatura can read (a
  sentence only a reader understands: these go through the date-only recovery step);
* ``POST /search``: Tavily's ``/search`` wire format (``TAVILY_BASE_URL`` points at it), answering
  the queries the scripted model proposes with the pages of that question;

and writes, for ``n`` questions, the three source datasets in their own schemas (FreshQA CSV,
InfoDeepSeek JSON, SealQA parquet) plus a LongSeal parquet holding gold and outdated snapshots for
every other SealQA question, whose gold URLs point at the server. :meth:`WildWeb.rules` are the
fake model's replies: per question the query proposals of two temporal rounds and one relevance
round; per page kind the verifier's verdict; the gold check and the date-only step.

Per question: 28 historical candidates (24 accepted by the verifier, 2 dated after the gold,
1 missing (404), 1 off-topic; the four bad ones come first), 14 relevance candidates (10 within the reference year, 2 in the
next, 1 undated, 1 older than the gold). Special questions: ``i % 9 == 4`` has a gold page that
names its coach only by a nickname (the model confirms it with a quote), ``i % 9 == 7`` a gold page
that now names another coach (flagged), ``i % 9 == 5`` an undated gold page (date recovered).
``dead_gold=True`` makes one InfoDeepSeek question's only reference URL a 404 (left out).
"""

from __future__ import annotations

import asyncio
import csv
import datetime as dt
import json
import re
import threading
from pathlib import Path
from typing import Any

from trek.ctrl.discovery import RELEVANCE_STRATEGIES, TEMPORAL_STRATEGIES

__all__ = ["WildWeb", "OLD", "REL"]

_A = ("Ash", "Bram", "Cold", "Dun", "Elder", "Fern", "Gald", "Hollow", "Ivy", "Kell", "Lark", "Mire")
_B = ("mere", "ford", "wick", "holt", "stead", "brook", "haven", "ley", "moor", "well", "by", "ton")
_FIRST = ("Ada", "Bruno", "Cora", "Dario", "Edda", "Felix", "Greta", "Hugo", "Ines", "Jonas", "Kaia", "Leon")
_LAST = ("Achterberg", "Brennan", "Castell", "Dvorak", "Eriksen", "Falconer", "Galloway", "Hartmann",
         "Ibsen", "Jovanovic", "Kowalski", "Lindqvist")
#: Coaches of earlier years (historical pages) and of neighbouring roles (relevance pages).
OLD = tuple(f"{first} {last}" for first, last in zip(
    ("Orla", "Piet", "Quinn", "Rhea", "Sten", "Tova", "Ugo", "Vera", "Wim", "Xenia", "Yusuf", "Zora",
     "Alba", "Bodil", "Cyrus", "Dagny", "Emil", "Frida", "Gorm", "Hedda", "Ivar", "Juno", "Knut", "Liv"),
    ("Penn", "Quist", "Rowe", "Sand", "Tarn", "Ulm", "Voss", "Wade", "Yates", "Zell", "Aske", "Birk",
     "Crane", "Dahl", "Egan", "Fisk", "Gray", "Holm", "Irwin", "Jarl", "Kemp", "Lund", "Marsh", "Nye"), strict=True))
REL = tuple(f"{first} {last}" for first, last in zip(
    ("Mona", "Nils", "Oda", "Per", "Rut", "Sven", "Tuva", "Ulf", "Vilde", "Yrsa", "Agnar", "Berit", "Carl", "Dina"),
    ("Aalto", "Berg", "Carlsen", "Dale", "Ek", "Fjell", "Grann", "Hovde", "Isaksen", "Juul", "Krog", "Lie",
     "Moe", "Nes"), strict=True))
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December")
_ORD = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
        "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth",
        "eighteenth", "nineteenth", "twentieth", "twenty-first", "twenty-second", "twenty-third",
        "twenty-fourth", "twenty-fifth", "twenty-sixth", "twenty-seventh", "twenty-eighth")
_YEARS = {2012: "two thousand and twelve", 2013: "two thousand and thirteen", 2014: "two thousand and fourteen", 2015: "two thousand and fifteen",
          2016: "two thousand and sixteen", 2017: "two thousand and seventeen", 2018: "two thousand and eighteen",
          2019: "two thousand and nineteen", 2020: "twenty twenty", 2021: "twenty twenty-one",
          2022: "twenty twenty-two", 2023: "twenty twenty-three", 2024: "twenty twenty-four"}
_FILLER = (
    "Members gathered at the boathouse on a cold morning, and the talk soon turned to the crews, the "
    "state of the old slipway and the fundraising drive for a new eight.",
    "The river was high after a week of rain, so training moved to the indoor tank and the ergometers "
    "for a few days, which the juniors did not mind at all.",
    "Volunteers repainted the oars in the club colours and the social committee planned the summer "
    "barbecue on the lawn beside the lock.",
    "Results at the spring head race were mixed: the veterans' four rowed well, while the novice crew "
    "caught a crab at the bend and lost most of a minute.",
    "The committee thanked the local council for its grant towards the new pontoon, which should make "
    "launching safer when the water is low in late summer.",
    "Anyone who wants to try the sport can join a learn-to-row course; places are limited and the "
    "waiting list usually fills within a week of opening.",
)
_HIST_SHAPES = 24  # accepted historical candidates per question; four more are bad on purpose


def _date_words(d: dt.date) -> str:
    return f"on the {_ORD[d.day - 1]} of {_MONTHS[d.month - 1]}, {_YEARS[d.year]}"


class Page:
    """One served page (a plain class: this script is loaded by path, outside ``sys.modules``)."""

    def __init__(self, path: str, title: str, sentences: list[str], date_meta: dt.date | None = None,
                 status: int = 200):
        self.path, self.title, self.sentences, self.date_meta, self.status = path, title, sentences, date_meta, status


class WildWeb:
    """The scripted web of the module doc; use as a context manager (starts and stops the server)."""

    def __init__(self, n: int = 9, *, dead_gold: bool = False):
        if not 1 <= n <= 144:
            raise ValueError("n must be 1..144")
        self.n = n
        self.dead_gold = dead_gold
        self.port: int | None = None
        self.pages: dict[str, Page] = {}
        self.searches: dict[str, list[str]] = {}
        self.search_log: list[str] = []
        self.fetch_log: list[str] = []

    # -- the world -------------------------------------------------------------------------------
    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base + path

    @staticmethod
    def club(i: int) -> str:
        return _A[i % 12] + _B[(i // 12) % 12]

    @staticmethod
    def coach(i: int) -> str:
        return f"{_FIRST[i % 12]} {_LAST[(i // 12 + i) % 12]}"

    def question(self, i: int) -> str:
        return f"Who is the current head coach of the {self.club(i)} Rowing Club?"

    @staticmethod
    def dataset(i: int) -> str:
        return ("freshqa", "infodeepseek", "sealqa")[i % 3]

    def in_longseal(self, i: int) -> bool:
        return self.dataset(i) == "sealqa" and (i // 3) % 2 == 0

    @staticmethod
    def anchor(i: int) -> dt.date:
        return dt.date(2024, 3, i % 20 + 1)

    @staticmethod
    def hist_date(k: int) -> dt.date:
        return dt.date(2013 + k % 11, k % 12 + 1, (k * 5) % 27 + 1)

    def _filler(self, i: int, k: int, n: int = 3) -> list[str]:
        return [_FILLER[(i + k + j) % len(_FILLER)] for j in range(n)]

    def _make_pages(self) -> None:
        for i in range(self.n):
            club, coach, anchor = self.club(i), self.coach(i), self.anchor(i)
            gold_sentences = [f"{club} Rowing Club has a new head coach.", *self._filler(i, 0, 2)]
            if i % 9 == 4:
                gold_sentences.append(f"The new head coach of {club}, known on the river as the Admiral, "
                                      "starts work on Monday.")
            elif i % 9 == 7:
                gold_sentences.append(f"After a short spell, the club has named {OLD[23]} head coach instead.")
            else:
                gold_sentences.append(f"The club has appointed {coach} as head coach of {club} Rowing Club.")
            gold_sentences.append(self._filler(i, 3, 1)[0])
            undated_gold = i % 9 == 5
            if undated_gold:
                gold_sentences.append(f"Club notice, issued {_date_words(anchor)}.")
            self.pages[f"/q{i}/gold"] = Page(f"/q{i}/gold", f"{club} names head coach", gold_sentences,
                                             None if undated_gold else anchor)
            if self.dataset(i) == "freshqa":
                self.pages[f"/q{i}/gold-moved"] = Page(f"/q{i}/gold-moved", "", [], status=404)
            if self.dead_gold and i == 1:
                self.pages[f"/q{i}/gold"].status = 404
            for k in range(_HIST_SHAPES + 4):
                self._historical(i, k)
            for k in range(14):
                self._relevance(i, k)

    def _historical(self, i: int, k: int) -> None:
        club = self.club(i)
        d = self.hist_date(k)
        path = f"/q{i}/h{k}"
        meta = None
        sentences = [f"News from {club} Rowing Club.", *self._filler(i, k)]
        if k < _HIST_SHAPES:
            sentences.insert(2, f"In those years the head coach was {OLD[k]}.")
            shape = k % 4
            if shape == 0:
                meta = d
            elif shape == 1:
                path = f"/q{i}/{d.year}/{d.month:02d}/{d.day:02d}/h{k}"
            elif shape == 2:
                sentences.append(f"Posted {d.day:02d}.{d.month:02d}.{d.year}")
            else:
                sentences.append(f"This note went up {_date_words(d)}.")
        elif k in (_HIST_SHAPES, _HIST_SHAPES + 1):  # newer than the gold: rejected by date
            sentences.insert(2, f"In those years the head coach was {OLD[k - _HIST_SHAPES]}.")
            meta = dt.date(2024, 11, 20 + k - _HIST_SHAPES)
        elif k == _HIST_SHAPES + 2:
            self.pages[path] = Page(path, "", [], status=404)
            return
        else:  # off-topic: the verifier says no
            sentences.insert(2, "The bake sale raised enough money for new lifejackets.")
            meta = d
        self.pages[path] = Page(path, f"{club} news {k}", sentences, meta)

    def _relevance(self, i: int, k: int) -> None:
        club = self.club(i)
        path = f"/q{i}/r{k}"
        sentences = [f"Coaching staff at {club} Rowing Club.", *self._filler(i, k + 2),
                     f"The assistant coach of the women's squad is {REL[k]}."]
        meta: dt.date | None
        if k < 10:
            meta = dt.date(2024, 5 + k % 7, 10 + k)
        elif k < 12:
            meta = dt.date(2025, 2, k)
        elif k == 12:
            meta = None
            sentences.append(f"Staff list published {_date_words(dt.date(2024, 9, 9))}.")
        else:
            meta = dt.date(2023, 6, 1)
        self.pages[path] = Page(path, f"{club} staff {k}", sentences, meta)

    def _make_searches(self) -> None:
        for i in range(self.n):
            hist = [p for p in self.pages if p.startswith(f"/q{i}/") and re.search(r"/h\d+$", p)]
            hist.sort(key=lambda p: int(p.rsplit("h", 1)[1]))
            hist = hist[_HIST_SHAPES:] + hist[:_HIST_SHAPES]  # the bad ones meet the verifier first
            rel = [f"/q{i}/r{k}" for k in range(14)]
            for r in range(2):
                for j, x in enumerate("abc"):
                    chunk = hist[r * 15 + j * 5: r * 15 + j * 5 + 5]
                    self.searches[self._query(i, "history", r, x)] = [self.url(p) for p in chunk]
            for j, x in enumerate("abc"):
                self.searches[self._query(i, "neighbour", 0, x)] = [self.url(p) for p in rel[j * 5: j * 5 + 5]]

    def _query(self, i: int, kind: str, r: int, x: str) -> str:
        return f"{self.club(i)} rowing {kind} {r}{x}"

    # -- rendering -------------------------------------------------------------------------------
    def html(self, page: Page) -> str:
        meta = (f'<meta property="article:published_time" content="{page.date_meta.isoformat()}T09:00:00Z">'
                if page.date_meta else "")
        body = "".join(f"<p>{s}</p>" for s in page.sentences)
        return (f"<html><head><title>{page.title}</title>{meta}</head><body><nav><a href='/'>Home</a> | "
                f"<a href='/news'>News</a></nav><article><h1>{page.title}</h1>{body}</article>"
                "<footer>Registered charity. Contact the secretary for membership.</footer></body></html>")

    # -- datasets --------------------------------------------------------------------------------
    def write_datasets(self, root: Path) -> tuple[Path, Path]:
        """The data directory (``freshqa/``, ``infodeepseek/``, ``sealqa/``) and the LongSeal file."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        root.mkdir(parents=True, exist_ok=True)
        for sub in ("freshqa", "infodeepseek", "sealqa"):
            (root / sub).mkdir(exist_ok=True)
        fresh, info, seal, longseal = [], [], [], []
        for i in range(self.n):
            q, a, gold = self.question(i), self.coach(i), self.url(f"/q{i}/gold")
            if self.dataset(i) == "freshqa":
                fresh.append({"id": str(1000 + i), "split": "TEST" if i % 2 else "DEV", "question": q,
                              "effective_year": "2024", "next_review": "", "false_premise": "FALSE",
                              "num_hops": "multi-hop", "fact_type": "fast-changing",
                              "source": f"{gold}\n{self.url(f'/q{i}/gold-moved')}", "answer_0": a,
                              "answer_1": a.split()[1], "note": ""})
            elif self.dataset(i) == "infodeepseek":
                info.append({"id": 2000 + i, "determinacy": True, "difficulty_GPT": True, "difficulty_DS": False,
                             "multi_hop": True, "long_tail": False, "time_sensitive": True, "freshness": True,
                             "distracting_info": False, "false_premise": False, "domain": ["sports"],
                             "advantage_language": ["English"], "query_en": q, "answer_en": a, "sources": [gold],
                             "verified": True})
            else:
                row = {"question": q, "answer": a, "urls": [gold], "freshness": "fast-changing",
                       "question_types": ["advanced reasoning"], "effective_year": "2024",
                       "search_results": "conflicting", "topic": "Sports", "canary": "trek-invented-canary"}
                seal.append(row)
                if self.in_longseal(i):
                    longseal.append({**row, **self._longseal_docs(i)})
        # rows the paper's filters leave out
        fresh.append({"id": "9001", "split": "TEST", "question": "How many piers does the invented town of "
                      "Wetherholm have?", "effective_year": "2024", "next_review": "", "false_premise": "FALSE",
                      "num_hops": "one-hop", "fact_type": "slow-changing", "source": "https://example.org/piers",
                      "answer_0": "3", "answer_1": "", "note": ""})
        info.append({"id": 9002, "time_sensitive": False, "freshness": False, "false_premise": False,
                     "advantage_language": ["English"], "query_en": "What colour is the invented Orrel flag?",
                     "answer_en": "Green", "sources": ["https://example.org/flag"]})
        seal.append({"question": "What is the invented river Dask's length?", "answer": "212 km",
                     "urls": ["https://example.org/dask"], "freshness": "never-changing",
                     "question_types": ["advanced reasoning"], "effective_year": "2024", "search_results": "",
                     "topic": "Geography", "canary": "trek-invented-canary"})
        columns = ["id", "split", "question", "effective_year", "next_review", "false_premise", "num_hops",
                   "fact_type", "source", *[f"answer_{j}" for j in range(10)], "note"]
        with open(root / "freshqa" / "FreshQA_v04072025.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=columns, restval="")
            w.writeheader()
            w.writerows(fresh)
        (root / "infodeepseek" / "InfoDeepSeek_v1.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
        pq.write_table(pa.Table.from_pylist(seal), root / "sealqa" / "sealqa_seal_hard.parquet")
        seal_path = root / "longseal.parquet"
        pq.write_table(pa.Table.from_pylist(longseal), seal_path)
        return root, seal_path

    def _longseal_docs(self, i: int) -> dict[str, Any]:
        club, coach = self.club(i), self.coach(i)

        def doc(k: int, dated: bool) -> dict[str, Any]:
            d = dt.date(2012, k + 1, 3)
            text = " ".join([f"Archive of {club} Rowing Club.", *self._filler(i, k),
                             f"Back then {club} was coached by {OLD[12 + k]}."]
                            + ([] if dated else [f"Entry recorded {_date_words(d)}."]))
            return {"date": d.isoformat() if dated else None, "text": text, "title": f"{club} archive {k}",
                    "url": f"https://longseal.example/q{i}/{k}"}

        gold = {"date": self.anchor(i).isoformat(), "title": f"{club} coach",
                "text": " ".join([f"{club} Rowing Club has a new head coach.", *self._filler(i, 0, 2),
                                  f"The club has appointed {coach} as head coach of {club} Rowing Club."]),
                "url": f"https://longseal.example/q{i}/gold"}
        docs = [doc(k, dated=k % 3 != 2) for k in range(8)]
        return {"golds": [gold], "12_docs": docs[:6], "20_docs": docs, "30_docs": docs}

    # -- the model's replies ---------------------------------------------------------------------
    def rules(self) -> list[dict[str, Any]]:
        """Fake-server rules (see the module doc); generic ones last."""
        rules: list[dict[str, Any]] = []
        for name in OLD:
            rules.append({"pattern": rf"coach was {re.escape(name)}\.[\s\S]*supports_other_answer",
                          "reply": json.dumps({"supports_other_answer": True, "answer": name,
                                               "reason": "an earlier coach"})})
        rules.append({"pattern": r"Judge one web page[\s\S]*supports_other_answer",
                      "reply": json.dumps({"supports_other_answer": False, "answer": None,
                                           "reason": "the page does not name a coach"})})
        for name in REL:
            rules.append({"pattern": rf"squad is {re.escape(name)}\.[\s\S]*careless reader",
                          "reply": json.dumps({"competing_answer": name, "right_type": True,
                                               "answers_question": False, "supports_reference": False,
                                               "reason": "an assistant coach, not the head coach"})})
        rules.append({"pattern": r"known on the river as the Admiral[\s\S]*states_answer",
                      "reply": json.dumps({"states_answer": True, "quote": "known on the river as the Admiral",
                                           "reason": "the nickname of the reference coach"})})
        rules.append({"pattern": r"Check one reference page",
                      "reply": json.dumps({"states_answer": False, "quote": None,
                                           "reason": "the page names another coach"})})
        dates = {self.hist_date(k) for k in range(_HIST_SHAPES) if k % 4 == 3}
        dates |= {dt.date(2012, k + 1, 3) for k in range(8)} | {dt.date(2024, 9, 9)}
        dates |= {self.anchor(i) for i in range(self.n) if i % 9 == 5}
        for d in sorted(dates):
            words = _date_words(d)
            rules.append({"pattern": rf"Find the publication date[\s\S]*{re.escape(words)}",
                          "reply": json.dumps({"date": d.isoformat(), "evidence": words})})
        rules.append({"pattern": "Find the publication date", "reply": json.dumps({"date": None, "evidence": None})})
        for i in range(self.n):
            q = re.escape(self.question(i))
            for r in range(2):
                rules.append({"pattern": rf"{q}[\s\S]*Strategy for this round: {re.escape(TEMPORAL_STRATEGIES[r])}",
                              "reply": json.dumps({"queries": [self._query(i, "history", r, x) for x in "abc"]})})
            rules.append({"pattern": rf"{q}[\s\S]*namely its {re.escape(RELEVANCE_STRATEGIES[0])},",
                          "reply": json.dumps({"queries": [self._query(i, "neighbour", 0, x) for x in "abc"],
                                               "changed_constraint": "role"})})
        rules.append({"pattern": "collecting older web pages|easy to confuse", "reply": json.dumps({"queries": []})})
        return rules

    # -- the server ------------------------------------------------------------------------------
    def __enter__(self) -> WildWeb:
        from aiohttp import web

        async def page(request: web.Request) -> web.Response:
            self.fetch_log.append(request.path)
            p = self.pages.get(request.path)
            if p is None or p.status != 200:
                return web.Response(status=404, text="not found")
            return web.Response(text=self.html(p), content_type="text/html")

        async def search(request: web.Request) -> web.Response:
            body = await request.json()
            query = str(body.get("query", ""))
            self.search_log.append(query)
            urls = self.searches.get(query, [])[: int(body.get("max_results") or 5)]
            results = [{"url": u, "title": self.pages[u[len(self.base):]].title or "page", "content": "",
                        "score": 1.0 - j / 10} for j, u in enumerate(urls)]
            return web.json_response({"query": query, "results": results, "response_time": 0.01})

        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def start() -> None:
            app = web.Application()
            app.router.add_post("/search", search)
            app.router.add_get("/{tail:.*}", page)
            self.runner = web.AppRunner(app, access_log=None)
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

        def serve() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(start())
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        if not ready.wait(60):
            raise RuntimeError("the scripted web did not start within 60 s")
        self._make_pages()
        self._make_searches()
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(60)
        self.loop.close()
