"""o200k_base counts in one place: exact totals from per-piece counts, the bounded per-text cache,
long texts, and the Ctrl build's token counts equal to a direct count of each context."""

import random

import pytest

from trek import tokens
from trek.contexts import read_contexts
from trek.ctrl.build import build
from trek.ctrl.pools import from_mini


def direct(text: str) -> int:
    return len(tokens.encoding().encode_ordinary(text))


def test_known_counts():
    assert tokens.count_tokens("") == 0
    assert tokens.count_tokens("hello world") == 2
    assert tokens.count_tokens("<|endoftext|>") == direct("<|endoftext|>") > 1  # special text as ordinary text


def test_the_fast_count_equals_the_length_of_the_encoding():
    rng = random.Random(7)
    alphabet = [*"abc XYZ 0123 .,;!?'\n\t/", "é", "中文", "😀", "\ud800", "<|endoftext|>"]
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        assert tokens._encode_count(text) == direct(text), text


@pytest.mark.parametrize("cached_chars", [0, 5, 10**9])  # every group apart, a mix, all in one call
@pytest.mark.parametrize("seed", range(3))
def test_counting_piece_by_piece_equals_counting_the_joined_text(seed, cached_chars, monkeypatch):
    monkeypatch.setattr(tokens, "CACHED_CHARS", cached_chars)
    # pieces meet after punctuation, line breaks, slashes, spaces, digits, non-Latin letters, ...
    alphabet = [*"ab Z9.\n\n\r/ \t'sé中😀-[]:", "\u00a0", "\u2028", "\u3000", "’", "\x1c", "\u0085", "Document"]
    rng = random.Random(seed)
    for _ in range(3000):
        pieces = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))) for _ in range(rng.randint(1, 6))]
        assert tokens.count_joined(pieces) == direct("".join(pieces)), pieces


def test_pieces_that_would_merge_are_joined_first():
    # ".\n\n" and "]\n/" are single chunks of the tokenizer: counting the pieces apart would differ
    for pieces in (["end.", "\n\n", "[Document 2]"], ["]\n", "/path"], ["a\n", " b"], ["x\r", "\ny"]):
        assert tokens.count_joined(pieces) == direct("".join(pieces))
    assert tokens.count_tokens("end.") + tokens.count_tokens("\n\n") != direct("end.\n\n")


def test_a_seam_that_merges_is_never_counted_apart(monkeypatch):
    monkeypatch.setattr(tokens, "CACHED_CHARS", 0)  # every group through count_tokens on its own
    seen = []
    real = tokens.count_tokens
    monkeypatch.setattr(tokens, "count_tokens", lambda t: seen.append(t) or real(t))
    tokens.count_joined(["[Document 1]\n", "Body.", "\n\n", "[Document 2]\n", "/x", "\n\n", "[Document 3]\n", "End"])
    assert seen == ["[Document 1]\n", "Body.\n\n", "[Document 2]\n/x\n\n", "[Document 3]\n", "End"]


def test_a_text_is_tokenized_once_and_the_cache_is_bounded(monkeypatch):
    tokens.clear_cache()
    text = "A page that recurs in many contexts. " * 20
    n = tokens.count_tokens(text)
    assert tokens.count_tokens(text) == n
    info = tokens.cache_info()
    assert (info["hits"], info["misses"], info["entries"]) == (1, 1, 1)
    monkeypatch.setattr(tokens._counts, "size", 3)
    for i in range(10):
        tokens.count_tokens(f"text number {i} " * 10)
    assert tokens.cache_info()["entries"] == 3
    tokens.clear_cache()
    assert tokens.cache_info() == {"hits": 0, "misses": 0, "entries": 0, "size": 3}


def test_long_texts_are_counted_exactly_in_pieces(monkeypatch):
    text = "".join(f"Line {i} of a long page, with a figure of {i * 7}.\n" + ("/tail\n" if i % 5 == 0 else "")
                   for i in range(6000))
    expected = direct(text)
    monkeypatch.setattr(tokens, "_PIECE_CHARS", 5000)  # forces dozens of cuts
    tokens.clear_cache()
    assert tokens.count_tokens(text) == expected


def test_the_build_counts_each_context_exactly_and_reuses_document_counts(tmp_path):
    tokens.clear_cache()
    result = build(from_mini(question_ids=["mini:01", "mini:02"]), tmp_path, embedder=None)
    contexts = read_contexts(result.contexts_path)
    assert contexts and all(c.tokens == direct(c.rendered) for c in contexts)
    assert tokens.cache_info()["hits"] > tokens.cache_info()["misses"]  # documents recur across conditions


def test_max_token_bytes_is_the_tokenizers_longest_token_and_bounds_hold():
    from trek.tokens import MAX_TOKEN_BYTES, chat_token_bounds, count_chat_tokens, encoding

    assert max(len(b) for b in encoding().token_byte_values()) == MAX_TOKEN_BYTES
    cases = [[{"role": "user", "content": "hello world"}],
             [{"role": "system", "content": " " * 500}, {"role": "user", "content": "日本語のテキスト " * 20, "name": "ann"}],
             [{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}],
             "a Responses input string"]
    for msgs in cases:
        lo, hi = chat_token_bounds(msgs)
        assert lo <= count_chat_tokens(msgs) <= hi, msgs
    tools = [{"type": "function", "function": {"name": "web_search"}}]
    lo, hi = chat_token_bounds(cases[0], tools)
    assert lo <= count_chat_tokens(cases[0], tools) <= hi
