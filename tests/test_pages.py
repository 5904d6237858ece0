"""The page store: URL identity, frozen corpora, placeholders, truncation, polite live fetching."""

from __future__ import annotations

import datetime as dt

import httpx
import pytest

from trek.pages import (
    GOLD_CHARS,
    NON_GOLD_CHARS,
    Page,
    PageStore,
    normalize_url,
    strip_openai_tracking,
    truncate_head,
)
from trek.types import Document


# -- normalize_url: one test per rule -------------------------------------------------------------
def test_scheme_is_ignored():
    assert normalize_url("https://example.com/a") == normalize_url("http://example.com/a") == "example.com/a"
    assert normalize_url("example.com/a") == "example.com/a"
    assert normalize_url("//example.com/a") == "example.com/a"


def test_fragment_is_dropped_including_text_fragments():
    assert normalize_url("https://example.com/a#section-2") == "example.com/a"
    assert normalize_url("https://example.com/a#:~:text=head%20coach") == "example.com/a"
    assert normalize_url("https://example.com/a?x=1#frag") == "example.com/a?x=1"


def test_host_is_lowercased():
    assert normalize_url("https://Example.COM/a") == "example.com/a"


def test_leading_www_is_dropped_but_only_leading():
    assert normalize_url("https://www.example.com/a") == "example.com/a"
    assert normalize_url("https://WWW.Example.com/a") == "example.com/a"
    assert normalize_url("https://news.www.example.com/a") == "news.www.example.com/a"
    assert normalize_url("https://www2.example.com/a") == "www2.example.com/a"


def test_trailing_slashes_are_stripped_from_the_path():
    assert normalize_url("https://example.com/a/b/") == "example.com/a/b"
    assert normalize_url("https://example.com/a/b//") == "example.com/a/b"
    assert normalize_url("https://example.com/") == "example.com"
    assert normalize_url("https://example.com/?q=1") == "example.com?q=1"


def test_path_case_is_preserved():
    assert normalize_url("https://example.com/News/Item") == "example.com/News/Item"
    assert normalize_url("https://example.com/News/Item") != normalize_url("https://example.com/news/item")


def test_query_string_is_preserved():
    assert normalize_url("https://example.com/a?id=7&Page=2") == "example.com/a?id=7&Page=2"
    assert normalize_url("https://example.com/a?id=7") != normalize_url("https://example.com/a?id=8")
    assert normalize_url("https://example.com/a/?id=7") == "example.com/a?id=7"


def test_surrounding_whitespace_and_carriage_returns_are_stripped():
    assert normalize_url("  https://example.com/a \r") == "example.com/a"
    assert normalize_url("\thttps://example.com/a\r\n") == "example.com/a"


def test_port_and_userinfo_are_kept_and_only_host_is_lowercased():
    assert normalize_url("https://www.Example.com:8080/X") == "example.com:8080/X"
    assert normalize_url("https://User@WWW.Example.com/X") == "User@example.com/X"


def test_all_rules_together():
    assert (
        normalize_url(" HTTPS://www.Example.com/News/Item/?id=7#:~:text=x\r") == "example.com/News/Item?id=7"
    )


# -- truncation -------------------------------------------------------------------------------------
def test_truncate_head_marks_the_cut_and_keeps_short_text():
    assert truncate_head("short", 10) == "short"
    out = truncate_head("x" * 5000, 3500)
    assert out.startswith("x" * 3500)
    assert "truncated" in out and "3,500 of 5,000" in out
    assert not out[3500:].startswith("x")
    assert NON_GOLD_CHARS == 3500 and GOLD_CHARS == 50000
    with pytest.raises(ValueError):
        truncate_head("abc", 0)


# -- store ------------------------------------------------------------------------------------------
def _doc(i: int, url: str, text: str = "", **kw) -> Document:
    return Document(id=f"d{i}", url=url, text=text or f"text of page {i}", **kw)


def test_add_documents_and_get_by_identity(tmp_path):
    store = PageStore(tmp_path / "pages.sqlite")
    n = store.add_documents(
        [
            _doc(1, "https://www.example.com/News/1/", title="One", date=dt.date(2024, 5, 1)),
            _doc(2, "http://example.com/News/1", text="duplicate identity: the first one wins"),
            _doc(3, "https://example.org/b?x=1"),
        ]
    )
    assert n == 2 and len(store) == 2
    page = store.get("example.com/News/1#top")
    assert page.available and page.title == "One" and page.date == "2024-05-01"
    assert page.text == "text of page 1" and page.url == "https://www.example.com/News/1/"
    assert "https://EXAMPLE.org/b?x=1" in store
    assert "https://example.org/b?x=2" not in store
    # persisted: a second store on the same file sees the pages
    again = PageStore(tmp_path / "pages.sqlite")
    assert again.get("https://example.org/b?x=1").available
    assert [p.key for p in again.pages()] == ["example.com/News/1", "example.org/b?x=1"]


def test_large_loads_and_reads_go_a_batch_at_a_time(monkeypatch):
    """More pages than a batch: every page read back once, in identity order, the first document
    of a repeated identity kept across batches; and a failed load leaves the store unchanged."""
    import trek.pages

    monkeypatch.setattr(trek.pages, "_BATCH", 7)
    store = PageStore()
    docs = [Document(id=f"d{i}", url=f"https://b.example/{(i * 11) % 50}", text=f"text {i}") for i in range(80)]
    assert store.add_documents(iter(docs)) == 50
    got = list(store.pages("corpus"))
    assert [p.key for p in got] == sorted(f"b.example/{j}" for j in range(50))
    assert {p.key: p.text for p in got} == {f"b.example/{(i * 11) % 50}": f"text {i}" for i in range(50)}
    assert store.corpus_pages(["b.example/3", "b.example/3", "nowhere.example/x"]).keys() == {"b.example/3"}

    def broken():
        yield from (Document(id=f"n{i}", url=f"https://n.example/{i}", text="new") for i in range(20))
        raise RuntimeError("the source broke")

    with pytest.raises(RuntimeError, match="source broke"):
        store.add_documents(broken())
    assert len(store) == 50 and store.lookup("https://n.example/0") is None


def test_missing_page_is_a_placeholder_not_an_error():
    store = PageStore()
    page = store.get("https://nowhere.example/page")
    assert isinstance(page, Page) and not page.available
    assert "unavailable" in page.text.lower() and "nowhere.example" in page.text
    assert page.status == "missing"


def test_render_truncates_with_marker():
    store = PageStore()
    store.add_documents([_doc(1, "https://example.com/long", text="y" * 4000, title="Long")])
    shown = store.get("https://example.com/long").render()
    assert shown.startswith("URL: https://example.com/long\nTitle: Long")
    assert "truncated" in shown and "y" * 3500 in shown and "y" * 3501 not in shown
    assert "truncated" not in store.get("https://example.com/long").render(GOLD_CHARS)


def test_fingerprint_changes_with_the_corpus():
    store = PageStore()
    store.add_documents([_doc(1, "https://example.com/a")])
    fp = store.fingerprint()
    assert store.fingerprint() == fp
    store.add_documents([_doc(2, "https://example.com/b")])
    assert store.fingerprint() != fp


# -- live fetching (httpx.MockTransport: no network) ----------------------------------------------
# A news page as sites serve it: navigation, an article with a date in its metadata and a table,
# a footer, scripts. Its text, title and date come from trafilatura (a core dependency).
HTML = """<!doctype html><html><head><title>Tram news | Quellbridge Courier</title>
<meta property="article:published_time" content="2024-03-05T10:00:00Z">
<script>var x = 1;</script><style>p { color: red }</style></head>
<body><nav><a href="/">Home</a> <a href="/menu">menu</a> <a href="/sport">Sport</a></nav>
<article><h1>New stops open</h1>
<p>Two new stops opened on the Tideway line on Monday, bringing the line to fourteen stops.</p>
<p>The transit authority said trams will run every six minutes at peak hours.</p>
<table><tr><th>Stop</th><th>Opened</th></tr><tr><td>Gull Quay</td><td>2024</td></tr></table>
</article><footer>Copyright Quellbridge Courier. All rights reserved.</footer>
<script>track("page")</script></body></html>"""
ARTICLE_LINES = [
    "Two new stops opened on the Tideway line on Monday, bringing the line to fourteen stops.",
    "The transit authority said trams will run every six minutes at peak hours.",
]


def _transport(log):
    def handler(request: httpx.Request) -> httpx.Response:
        log.append(request)
        path = request.url.path
        if path == "/ok":
            return httpx.Response(200, text=HTML, headers={"content-type": "text/html; charset=utf-8"})
        if path == "/gone":
            return httpx.Response(404, text="not found")
        if path == "/busy":
            return httpx.Response(503, text="try later")
        if path == "/pdf":
            return httpx.Response(200, content=b"%PDF-1.7", headers={"content-type": "application/pdf"})
        if path == "/big":
            return httpx.Response(200, text="z" * 5000, headers={"content-type": "text/plain"})
        if path == "/slow":
            raise httpx.ReadTimeout("slow", request=request)
        if path == "/moved":
            return httpx.Response(302, headers={"location": "https://site.example/ok"})
        return httpx.Response(500)

    return httpx.MockTransport(handler)


def test_fetch_is_off_by_default():
    log: list = []
    store = PageStore(transport=_transport(log))
    assert not store.get("https://site.example/ok").available
    assert log == []


def test_fetch_extracts_text_and_caches_it(tmp_path):
    log: list = []
    store = PageStore(tmp_path / "p.sqlite", fetch=True, transport=_transport(log))
    page = store.get("https://site.example/ok")
    assert page.available and page.source == "fetch"
    assert (page.title, page.date) == ("New stops open", "2024-03-05")
    lines = page.text.splitlines()
    assert lines[: 1 + len(ARTICLE_LINES)] == ["New stops open", *ARTICLE_LINES]
    assert "Gull Quay" in page.text  # tables are kept
    for chrome in ("var x", "menu", "Sport", "Copyright", "track(", "color: red"):
        assert chrome not in page.text, chrome
    assert log[0].headers["user-agent"].startswith("TrekResearchBot")
    again = store.get("http://www.site.example/ok/")
    assert again.text == page.text and len(log) == 1  # served from the store
    # fetched pages are not part of the frozen corpus
    assert list(store.pages("corpus")) == [] and len(list(store.pages(None))) == 1


def test_fetch_failures(tmp_path):
    log: list = []
    store = PageStore(tmp_path / "p.sqlite", fetch=True, transport=_transport(log))
    gone = store.get("https://site.example/gone")
    assert not gone.available and "HTTP 404" in gone.text
    store.get("https://site.example/gone")
    assert len(log) == 1  # a definite 404 is remembered
    busy = store.get("https://site.example/busy")
    assert not busy.available and "HTTP 503" in busy.text
    store.get("https://site.example/busy")
    assert len(log) == 3  # a 5xx is not remembered: tried again next time
    pdf = store.get("https://site.example/pdf")
    assert not pdf.available and "unsupported content type" in pdf.text
    slow = store.get("https://site.example/slow")
    assert not slow.available and "ReadTimeout" in slow.text


def test_fetch_follows_redirects_with_the_user_agent_it_was_given():
    log: list = []
    store = PageStore(fetch=True, user_agent="agent/1", transport=_transport(log))
    assert store.get("https://site.example/moved").available
    assert [r.url.path for r in log] == ["/moved", "/ok"] and {r.headers["user-agent"] for r in log} == {"agent/1"}


def test_fetch_respects_the_size_limit():
    store = PageStore(fetch=True, max_bytes=1000, transport=_transport([]))
    page = store.get("https://site.example/big")
    assert page.available and len(page.text) == 1000


def test_cached_flag_tells_a_stored_page_from_a_fresh_fetch():
    log: list = []
    store = PageStore(fetch=True, transport=_transport(log))
    first = store.get("https://site.example/ok")
    again = store.get("https://site.example/ok")
    assert (first.cached, again.cached, len(log)) == (False, True, 1)
    assert store.get("https://site.example/gone").cached is False
    assert store.get("https://site.example/gone").cached is True  # a remembered refusal
    assert store.get("https://site.example/elsewhere-off").cached is False


# -- OpenAI's tracking parameter ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://a.example/p?utm_source=openai", "https://a.example/p"),
        ("https://a.example/p?id=7&utm_source=openai", "https://a.example/p?id=7"),
        ("https://a.example/p?utm_source=openai&id=7#top", "https://a.example/p?id=7#top"),
        ("https://a.example/p?a=1&utm_source=openai&b=2", "https://a.example/p?a=1&b=2"),
        ("https://a.example/p?utm_source=openai.com", "https://a.example/p?utm_source=openai.com"),
        ("https://a.example/p?utm_source=twitter", "https://a.example/p?utm_source=twitter"),
        ("https://a.example/utm_source=openai", "https://a.example/utm_source=openai"),
        ("https://a.example/P?Q=1", "https://a.example/P?Q=1"),
    ],
)
def test_strip_openai_tracking_removes_only_that_parameter(url, expected):
    assert strip_openai_tracking(url) == expected


@pytest.mark.parametrize(
    "url", ["http://localhost:8000/v1/models", "http://127.0.0.1/x", "http://10.0.0.5/", "http://[::1]/", "192.168.1.1/admin"]
)
def test_live_fetch_refuses_local_and_private_addresses(url):
    log: list = []
    page = PageStore(fetch=True, transport=_transport(log)).get(url)
    assert not page.available and "private network" in page.text and log == []
    allowed = PageStore(fetch=True, allow_private=True, transport=_transport(log)).get(url)
    assert len(log) == 1 and not allowed.available  # reached the (mock) network this time


def test_html_text_title_and_date_are_trafilaturas():
    import trafilatura

    from trek.pages import extract_text

    url = "https://site.example/ok"
    title, date, text = extract_text(HTML, url)
    assert text == trafilatura.extract(HTML, url=url, include_comments=False, include_tables=True)
    meta = trafilatura.extract_metadata(HTML, default_url=url, extensive=False)
    assert (title, date) == (meta.title, meta.date) == ("New stops open", "2024-03-05")
    # a year the text only mentions is no date (htmldate's extensive search would make it 1 January)
    body = "<p>" + "The club met and talked about the season ahead in some detail. " * 6 + "</p>"
    mentions = f"<html><head><title>News</title></head><body><article>{body}<p>They won the 2019 title.</p></article></body></html>"
    assert extract_text(mentions, url)[1] is None
    assert trafilatura.extract_metadata(mentions, default_url=url).date == "2019-01-01"
    dated = mentions.replace("They won", "Posted 05.03.2019. They won")
    assert extract_text(dated, url)[1] == "2019-03-05"
    assert extract_text(mentions, "https://site.example/news/2021/04/09/club")[1] == "2021-04-09"
    # no main text at all: nothing is made up from the markup; the store records why
    assert extract_text("<html><head><title>Empty</title></head><body></body></html>", url)[2] == ""


def test_a_page_without_text_or_that_breaks_the_extractor_is_a_remembered_failure(monkeypatch):
    import trafilatura

    empty = "<html><head><title>Empty</title></head><body><script>x()</script></body></html>"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=empty if request.url.path == "/empty" else HTML,
                              headers={"content-type": "text/html"})

    store = PageStore(fetch=True, transport=httpx.MockTransport(handler))
    page = store.get("https://site.example/empty")
    assert not page.available and "no text could be extracted" in page.text

    def broken(*args, **kwargs):
        raise RuntimeError("extractor bug")

    monkeypatch.setattr(trafilatura, "extract", broken)
    page = store.get("https://site.example/broken")
    assert not page.available and "text extraction failed: RuntimeError" in page.text
