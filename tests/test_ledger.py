"""The spend ledger: reserve the worst case, settle the actual price, carry the total over runs."""

import asyncio
import json

import pytest

from trek.llm import ChatRequest, LLMClient
from trek.llm.ledger import OverBudget, SpendLedger, check_budget, ledger_path, read_ledger, spending
from trek.llm.usage import Price, PriceTable
from trek.testing.fake_openai import FakeOpenAIServer
from trek.types import RecordError

# $1 per output token, input free: a request with max_tokens=10 may cost $10; the fake's default
# reply ("fake answer <hash>") is 3 tokens, $3
PRICES = PriceTable({"m": Price(input=0.0, output=1e6)})


def requests(n, max_tokens=10):
    return [ChatRequest(messages=[{"role": "user", "content": f"q{i}"}], params={"max_tokens": max_tokens})
            for i in range(n)]


def test_concurrent_calls_fill_the_budget_without_passing_it():
    # admitted while spent + reserved + $10 <= $50: 13 settled calls ($39) leave room for a 14th,
    # 14 ($42) do not. Reserving up front and refusing at once (with 16 connections the first
    # five reservations fill $50) answered 5 and left the other 25 pending.
    with FakeOpenAIServer(latency=0.02) as srv:
        c = LLMClient("m", base_url=srv.base_url, prices=PRICES, budget_usd=50.0, max_connections=16,
                      progress=False)
        res = c.map(requests(30))
        sent = srv.stats()["requests"]
    ok = [r for r in res if r.ok]
    assert len(ok) == 14 and sent == 14
    assert c.spent_usd == pytest.approx(42.0) and c.ledger.total_usd == pytest.approx(42.0)
    assert all("budget cap $50.0000 reached" in r.error for r in res if not r.ok)
    assert c.ledger.reserved_usd == 0 and c.ledger.in_flight == 0


def test_a_request_without_an_output_cap_is_reserved_at_the_assumed_output():
    with FakeOpenAIServer() as srv:
        c = LLMClient("m", base_url=srv.base_url, prices=PRICES, budget_usd=99.0, assume_output=100, progress=False)
        r = c.chat([{"role": "user", "content": "hi"}])  # worst case 100 tokens: $100 > $99
        assert not r.ok and "may cost up to $100.0000" in r.error and srv.stats()["requests"] == 0
        c = LLMClient("m", base_url=srv.base_url, prices=PRICES, budget_usd=100.0, assume_output=100, progress=False)
        assert c.chat([{"role": "user", "content": "hi"}]).ok


def test_the_worst_case_counts_the_prompt_and_widens_other_tokenizers():
    body = {"messages": [{"role": "user", "content": "one two three"}], "max_tokens": 5}
    c = LLMClient("m", prices=PRICES)
    price = Price(input=1e6, output=0.0)  # $1 per input token
    from trek.llm.estimate import count_chat_tokens

    n = count_chat_tokens(body["messages"])
    assert c.worst_cost("gpt-4o", body, price) == pytest.approx(n)
    assert c.worst_cost("llama-3", body, price) == pytest.approx(n * 1.25)
    assert c.worst_cost("gpt-4o", body, Price(input=0.0, output=1e6)) == pytest.approx(5)


def test_a_ledger_file_carries_the_spend_to_the_next_invocation(tmp_path):
    path = ledger_path(tmp_path / "answers.jsonl")
    assert path.name == ".answers.jsonl.spend"
    with FakeOpenAIServer() as srv:
        for expected_ok in (3, 0):
            c = LLMClient("m", base_url=srv.base_url, prices=PRICES, budget_usd=10.0, max_connections=1,
                          progress=False)
            with spending([c], path) as ledger:
                res = c.map(requests(5, max_tokens=3))
            assert sum(r.ok for r in res) == expected_ok
        assert srv.stats()["requests"] == 3
    assert read_ledger(path) == pytest.approx(9.0) and ledger.before_usd == pytest.approx(9.0)
    assert "in earlier runs" in res[0].error and str(path) in res[0].error
    assert not path.with_suffix(".tmp").exists()


def test_no_file_without_a_priced_fresh_call(tmp_path):
    path = tmp_path / ".x.spend"
    with FakeOpenAIServer() as srv:
        c = LLMClient("unpriced", base_url=srv.base_url, prices=PRICES, progress=False)
        with spending([c], path):
            assert c.chat([{"role": "user", "content": "hi"}]).ok
    assert not path.exists()


def test_a_call_in_flight_when_the_process_died_counts_at_its_worst_case(tmp_path):
    path = tmp_path / ".out.spend"
    path.write_text('{"reserve":"a-1","usd":10}\n{"settle":"a-1","usd":3}\n{"reserve":"a-2","usd":10}\n'
                    '{"spent":"batch","usd":0.5}\n')
    assert read_ledger(path) == pytest.approx(13.5)
    path.write_text(path.read_text() + '{"settle":"a-')  # a torn last line is ignored
    assert read_ledger(path) == pytest.approx(13.5)
    path.write_text('{"settle":"a-1","usd":3}\nnot json\n{"settle":"a-2","usd":3}\n')
    with pytest.raises(RecordError, match=r"\.out\.spend.*line 2"):
        read_ledger(path)
    assert read_ledger(tmp_path / "missing") == 0.0


def test_waiting_reservations_wake_when_room_frees():
    async def go():
        ledger = SpendLedger(None, 10.0)
        first = await ledger.reserve(8.0)
        waiting = asyncio.ensure_future(ledger.reserve(5.0))
        await asyncio.sleep(0.01)
        assert not waiting.done()  # $8 held, $5 more would pass $10: it waits
        ledger.settle(first, 2.0)
        second = await asyncio.wait_for(waiting, 1)
        assert ledger.reserved_usd == 5.0 and ledger.total_usd == 2.0
        with pytest.raises(OverBudget):  # spent $2 + $9 can never fit: refused at once
            await ledger.reserve(9.0)
        ledger.settle(second, 1.0)
        return ledger

    ledger = asyncio.run(go())
    assert ledger.total_usd == 3.0 and ledger.refused == 1


def test_an_outer_ledger_is_kept_by_inner_stages(tmp_path):
    a, b = LLMClient("m", prices=PRICES), LLMClient("m", prices=PRICES, budget_usd=4.0)
    with spending([a, b], tmp_path / ".outer.spend") as outer:
        assert outer.budget_usd == 4.0 and a.ledger is outer and b.ledger is outer
        with spending([b], tmp_path / ".inner.spend", 100.0) as inner:
            assert inner is outer
    assert a.ledger is None and b.ledger is not outer and b.ledger.path is None


@pytest.mark.parametrize("bad", [float("nan"), -1.0, float("inf"), "5", True])
def test_bad_budgets_are_refused(bad):
    with pytest.raises(ValueError, match="budget must be a finite, non-negative number"):
        check_budget(bad)
    with pytest.raises(ValueError, match="budget"):
        LLMClient("m", budget_usd=bad)


def test_ledger_lines_are_json(tmp_path):
    path = tmp_path / ".x.spend"
    with FakeOpenAIServer() as srv:
        c = LLMClient("m", base_url=srv.base_url, prices=PRICES, progress=False)
        with spending([c], path):
            c.chat([{"role": "user", "content": "hi"}], max_tokens=4)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [sorted(x) for x in lines] == [["model", "reserve", "t", "usd"], ["settle", "usd"]]
    assert lines[0]["usd"] == 4.0 and lines[1]["usd"] == 3.0 and lines[0]["reserve"] == lines[1]["settle"]
