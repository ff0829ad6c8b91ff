"""The engine-wide n-gram cache: finished requests' n-grams draft where a request's own text has none, within a
stated number of entries (least recently used evicted), and the output stays that of decoding without drafts."""

import json

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.generation.speculative.draft_length import DraftLength
from engine.generation.speculative.ngram import NgramIndex
from engine.generation.speculative.ngram_cache import ADDED_TOKENS, CONTINUATION_TOKENS, NgramCache


def cache_of(*texts, max_entries=1 << 16) -> NgramCache:
    cache = NgramCache(max_entries)
    for text in texts:
        cache.add(text)
    return cache


def test_drafts_what_followed_in_an_earlier_request():
    cache = cache_of([1, 2, 3, 4, 5, 6])
    assert NgramIndex().propose([9, 2, 3], 3) == []
    assert NgramIndex().propose([9, 2, 3], 3, cache) == [4, 5, 6]
    assert cache.continuation((1, 2, 3), 2) == [4, 5]
    assert cache.continuation((6,), 2) == []  # the text's last token had no continuation


def test_the_own_text_first_at_each_length_and_the_longest_suffix_wins():
    cache = cache_of([2, 3, 4, 4, 4])
    own = [2, 3, 7, 8, 2, 3]  # "2 3" continues with 7 here and with 4 in the earlier request
    assert NgramIndex().propose(own, 2, cache) == [7, 8]
    own = [5, 3, 7, 8, 2, 3]  # here only "3" occurred before; the cache holds the longer "2 3"
    assert NgramIndex().propose(own, 2, cache) == [4, 4]


def test_a_later_request_replaces_an_earlier_continuation():
    cache = cache_of([1, 2, 3], [1, 2, 9])
    assert cache.continuation((1, 2), 4) == [9]


def test_continuations_are_bounded():
    text = list(range(100, 200))
    cache = cache_of(text)
    assert cache.continuation((100,), 1000) == text[1 : 1 + CONTINUATION_TOKENS]


def test_a_long_text_adds_its_last_tokens_alone():
    text = list(range(1000, 1000 + ADDED_TOKENS + 100))
    cache = cache_of(text)
    assert cache.continuation((1000,), 1) == [] and cache.continuation((text[-3],), 2) == text[-2:]
    assert len(cache) == 3 * (ADDED_TOKENS - 1) - 3


def test_at_most_max_entries_the_least_recently_used_evicted():
    cache = cache_of([1, 2], max_entries=4)  # (1,) -> 2
    assert cache.continuation((1,), 1) == [2]  # used: now the most recent
    cache.add([5, 6, 7])  # (5,), (6,), (5, 6): 4 entries in all
    assert len(cache) == 4 and cache.continuation((1,), 1) == [2]
    cache.add([8, 9])  # (8,) -> 9 evicts the least recently used, (5,)
    assert len(cache) == 4
    assert cache.continuation((5,), 1) == [] and cache.continuation((1,), 1) == [2]
    assert cache.continuation((8,), 1) == [9]
    cache.clear()
    assert len(cache) == 0


CODE = json.load(open("resources/traces/workloads.json"))["code"]
PROMPTS = [CODE[0], CODE[0], CODE[1]]  # the demo's reply to CODE[0] repeats little of its own text
SAMPLING = SamplingParams(max_tokens=48, ignore_eos=True)


def replies(mode):
    """The bundled demo's greedy replies, one request after another on one engine -> (replies, its cache size)."""
    with Engine(EngineOptions(device="cpu", speculative=mode)) as engine:
        results = [engine.generate(GenerateRequest(prompt=p, sampling=SAMPLING)) for p in PROMPTS]
        speculation = engine._core.speculation
        return results, (len(speculation.cache) if speculation is not None else 0)


def test_a_warm_cache_drafts_earlier_replies_and_the_ids_stay_those_of_off(monkeypatch):
    # every step drafts the most it may: what the cache offers, not what the draft-length rule's step timings (noisy
    # on a loaded machine) let through
    monkeypatch.setattr(DraftLength, "choose", lambda rule: rule.max_tokens)
    plain, _ = replies("off")
    drafted, cache_entries = replies("ngram")
    assert [list(r.token_ids) for r in drafted] == [list(r.token_ids) for r in plain]
    assert cache_entries > 0
    first, repeated = drafted[0].stats, drafted[1].stats
    # the same prompt again: the earlier reply, now in the cache, drafts most of this one
    assert repeated.spec_accepted >= SAMPLING.max_tokens // 2 > first.spec_accepted
