"""Hypothesis strategies for request bodies the server must refuse with a 4xx: one field of a good body
made bad (a wrong type, a number out of range, text that is not Unicode), a field Wisp cannot honour, deep
nesting, or a body past the size limit."""

from __future__ import annotations

import json

from hypothesis import strategies as st

CHAT = {"model": "wisp-demo", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
COMPLETION = {"model": "wisp-demo", "prompt": "def f(", "max_tokens": 4}

lone_surrogate = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
not_unicode = st.builds(lambda a, s, b: a + s + b, st.text(max_size=8), lone_surrogate, st.text(max_size=8))
huge = st.one_of(st.integers(min_value=2**64), st.integers(max_value=-(2**63) - 1))
not_a_number = st.one_of(st.text(max_size=8), st.lists(st.integers(), max_size=3), st.booleans(),
                         st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))
not_text = st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(),
                     st.lists(st.integers(), min_size=1, max_size=3))
ROLES = ("system", "developer", "user", "assistant")


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def user_says(content) -> list[dict]:
    return [{"role": "user", "content": content}]


def bad_chat_field() -> st.SearchStrategy[tuple[str, object]]:
    counts = st.one_of(huge, not_a_number, st.integers(max_value=-1))
    probabilities = st.one_of(st.floats(min_value=2.0001, allow_nan=False), st.floats(max_value=-0.0001), not_a_number)
    messages = st.one_of(
        st.just([]), not_text, st.one_of(not_unicode, not_text).map(user_says),
        st.text(max_size=6).filter(lambda role: role not in ROLES).map(lambda role: [{"role": role, "content": "hi"}]))
    return st.one_of(
        st.tuples(st.sampled_from(["max_tokens", "top_k", "n"]), counts),
        st.tuples(st.just("seed"), st.one_of(huge, not_a_number.filter(lambda v: not isinstance(v, bool)))),
        st.tuples(st.sampled_from(["temperature", "top_p"]), probabilities),
        st.tuples(st.just("stop"), st.one_of(not_unicode, st.just([""]), st.lists(not_unicode, min_size=1))),
        st.tuples(st.just("messages"), messages),
        st.tuples(st.sampled_from(["mirostat", "typical_p", "use_beam_search", "min_tokens"]), st.just(3)),
    )


def bad_completion_field() -> st.SearchStrategy[tuple[str, object]]:
    ids_outside = st.one_of(st.lists(st.integers(max_value=-1), min_size=1, max_size=3),
                            st.lists(st.integers(min_value=10**6), min_size=1, max_size=3))
    return st.one_of(st.tuples(st.just("prompt"), st.one_of(not_unicode, st.just(""), st.just([]), ids_outside)),
                     st.tuples(st.just("suffix"), not_unicode))


def field_changes() -> st.SearchStrategy[tuple[str, dict]]:
    """(endpoint, body) with one field of a good body made bad."""
    return st.one_of(bad_chat_field().map(lambda kv: ("/chat/completions", {**CHAT, kv[0]: kv[1]})),
                     bad_completion_field().map(lambda kv: ("/completions", {**COMPLETION, kv[0]: kv[1]})))


def raw_bodies(max_body_bytes: int) -> st.SearchStrategy[tuple[str, bytes]]:
    """(endpoint, raw bytes): deep nesting, NaN, invalid UTF-8, ints past Python's digit limit, too large."""
    deep = st.integers(min_value=40, max_value=max_body_bytes // 2)
    bodies = st.one_of(
        deep.map(lambda depth: ('{"messages": ' + nested(depth) + "}").encode()),
        st.sampled_from([b'{"temperature": NaN}', b'{"top_p": Infinity}', b"\xff\xfe{}", b"[]", b"null", b"{"]),
        st.integers(min_value=4400, max_value=20000).map(lambda n: b'{"max_tokens": ' + b"9" * n + b"}"),
        st.integers(min_value=max_body_bytes + 1, max_value=2 * max_body_bytes).map(
            lambda n: json.dumps({**CHAT, "messages": [{"role": "user", "content": "x" * n}]}).encode()),
    )
    return st.tuples(st.sampled_from(["/chat/completions", "/completions"]), bodies)
