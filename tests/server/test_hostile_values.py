"""Well-formed values that once hurt every request in flight: each is answered alone, and a good stream beside
it ends with exactly the tokens it gets alone."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.server import ServerLimits, start_server
from tests.server.conftest import API_KEY
from tests.server.good_stream import beside_a_good_stream
from tests.server.test_hostile_requests import CHAT, GOOD, HEADERS, post


@pytest.mark.parametrize("values", [
    {"temperature": 1e-40}, {"temperature": 5e-324}, {"top_p": 1e-300}, {"temperature": 1e-40, "top_p": 5e-324},
])
def test_tiny_temperature_or_top_p_answers_and_spares_the_batch(server, values):
    body = {**CHAT, "max_tokens": 8, **values}
    responses = beside_a_good_stream(server, lambda: [post(server, body) for _ in range(3)])
    assert [response.status_code for response in responses] == [200] * 3
    assert {response.json()["choices"][0]["finish_reason"] for response in responses} <= {"stop", "length"}


def test_a_huge_stop_string_is_400_naming_it_and_spares_the_batch(server):
    body = {**CHAT, "stop": ["ok", "q" * 5000]}
    response = beside_a_good_stream(server, lambda: post(server, body))
    assert response.status_code == 400 and response.json()["error"]["param"] == "stop.1"


def test_the_longest_stop_strings_leave_other_streams_untouched(server):
    body = {**CHAT, "max_tokens": 64, "ignore_eos": True, "stop": ["q" * 1024, "\n" * 1000 + "x"] * 8}
    responses = beside_a_good_stream(server, lambda: [post(server, body) for _ in range(4)])
    assert [response.status_code for response in responses] == [200] * 4


@pytest.fixture(scope="module")
def roomy_server(demo_engine):
    handle = start_server(demo_engine, "127.0.0.1", 0, api_key=API_KEY, limits=ServerLimits(max_body_bytes=8 << 20))
    yield handle
    handle.stop()


def chunk_times(server, body: dict, first: threading.Event) -> list[float]:
    times = []
    with httpx.stream("POST", server.url + "/completions", json={**body, "stream": True}, headers=HEADERS,
                      timeout=120) as response:
        for line in response.iter_lines():
            if line.startswith("data: {"):
                times.append(time.monotonic())
                first.set()
    return times


def test_a_megabyte_prompt_does_not_stall_other_streams(roomy_server):
    big = {**CHAT, "messages": [{"role": "user", "content": "word " * 600_000}]}  # 3 MB, 600k tokens
    first = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(chunk_times, roomy_server, {**GOOD, "max_tokens": 400}, first)
        assert first.wait(60)
        refused = post(roomy_server, big)
        times = running.result(timeout=120)
    assert refused.status_code == 400 and "context" in refused.json()["error"]["message"]
    assert max(later - earlier for earlier, later in zip(times, times[1:])) < 3.0  # it was the tokenising time


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(temperature=st.floats(0.0, 2.0), top_p=st.floats(0.0, 1.0, exclude_min=True),  # OpenAI's ranges
       top_k=st.integers(0, 2**31 - 1), stop=st.lists(st.text(min_size=1, max_size=40), max_size=4))
def test_generated_sampling_values_and_stops_spare_a_good_stream(server, temperature, top_p, top_k, stop):
    body = {**CHAT, "max_tokens": 8, "temperature": temperature, "top_p": top_p, "top_k": top_k, "stop": stop}
    response = beside_a_good_stream(server, lambda: post(server, body))
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:  # only text a request cannot carry (a lone surrogate) is refused
        assert response.json()["error"]["param"].startswith("stop.")
