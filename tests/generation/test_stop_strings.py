"""Stop strings: the streamed cut equals a search of the text received so far for any stops and any split, and a
long stop string costs each token time linear in that token's text (it once cost the stop's length squared)."""

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.text.detokenizer import StopStringMatcher
from engine.sampling_checks import MAX_STOP_CHARS

ALPHABET = "ab\n😀"


def feed_all(matcher: StopStringMatcher, deltas: list[str]) -> tuple[str, bool]:
    emitted = []
    for delta in deltas:
        text, stopped = matcher.feed(delta)
        emitted.append(text)
        if stopped:
            return "".join(emitted), True
    return "".join(emitted) + matcher.flush(), False


def expected_cut(stops: list[str], text: str, bounds: list[int]) -> tuple[str, bool, str | None]:
    """What streaming can know: at the first delta end by which some stop string has appeared, the cut is at
    the earliest one seen so far (the first listed wins a tie)."""
    for end in bounds[1:]:
        found = [(text.find(stop, 0, end), index) for index, stop in enumerate(stops) if stop in text[:end]]
        if found:
            start, index = min(found)
            return text[:start], True, stops[index]
    return text, False, None


@settings(max_examples=400, deadline=None)
@given(stops=st.lists(st.text(ALPHABET, min_size=1, max_size=6), max_size=4),
       text=st.text(ALPHABET, max_size=40), cuts=st.lists(st.integers(0, 40), max_size=12))
def test_streamed_cut_equals_a_search_of_what_has_arrived(stops, text, cuts):
    bounds = sorted({0, len(text), *(cut for cut in cuts if cut < len(text))})
    deltas = [text[start:end] for start, end in zip(bounds, bounds[1:])]
    matcher = StopStringMatcher(stops)
    emitted, stopped, matched = expected_cut(stops, text, bounds)
    assert feed_all(matcher, deltas) == (emitted, stopped) and matcher.matched_stop == matched


def test_a_longest_stop_string_costs_little_per_token():
    matcher = StopStringMatcher(["q" * (MAX_STOP_CHARS - 1) + "!", "\n" * (MAX_STOP_CHARS - 1) + "x"])
    start = time.perf_counter()
    emitted = "".join(matcher.feed("qq")[0] for _ in range(20_000))
    assert time.perf_counter() - start < 1.0  # ~0.04 s; matching each tail against each prefix took ~10 s
    assert emitted + matcher.flush() == "qq" * 20_000 and not matcher.is_stopped
