"""A client that goes away cancels its request: the engine has no sequence left afterwards."""

import time

import httpx

from tests.server.conftest import API_KEY, health, is_idle, wait_until

LONG = {"model": "wisp-demo", "prompt": "def fib(n):", "max_tokens": 500, "ignore_eos": True, "temperature": 0}
HEADERS = {"Authorization": f"Bearer {API_KEY}"}
# 500 tokens take the demo model well over 5 s on a CPU; freeing within that proves the cancel.
FREED_WITHIN_S = 5.0


def test_closing_a_stream_frees_the_sequence(server, demo_engine):
    with httpx.Client(timeout=30) as http:
        with http.stream("POST", server.url + "/completions", json={**LONG, "stream": True}, headers=HEADERS) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            assert next(line for line in lines if line.startswith("data:"))
            assert not is_idle(demo_engine)
    closed = time.monotonic()
    assert wait_until(lambda: is_idle(demo_engine), FREED_WITHIN_S)
    assert time.monotonic() - closed < FREED_WITHIN_S
    assert wait_until(lambda: health(server)["requests_in_flight"] == 0)


def test_a_non_streaming_client_that_gives_up_frees_the_sequence(server, demo_engine):
    try:
        httpx.post(server.url + "/completions", json=LONG, headers=HEADERS, timeout=1.0)
    except httpx.ReadTimeout:
        pass
    gave_up = time.monotonic()
    assert wait_until(lambda: is_idle(demo_engine), FREED_WITHIN_S)
    assert time.monotonic() - gave_up < FREED_WITHIN_S


def test_closing_a_stream_of_several_choices_frees_every_sequence(server, demo_engine):
    with httpx.Client(timeout=30) as http:
        body = {**LONG, "stream": True, "n": 2, "temperature": 1.0}
        with http.stream("POST", server.url + "/completions", json=body, headers=HEADERS) as r:
            assert r.status_code == 200
            assert next(line for line in r.iter_lines() if line.startswith("data:"))
            # the stats are a snapshot the engine thread refreshes between steps: wait for one that has both
            assert wait_until(lambda: demo_engine.stats().running + demo_engine.stats().waiting == 2, FREED_WITHIN_S)
    closed = time.monotonic()
    assert wait_until(lambda: is_idle(demo_engine), FREED_WITHIN_S)
    assert time.monotonic() - closed < FREED_WITHIN_S
