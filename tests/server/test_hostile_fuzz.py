"""Property: while good streams run, every generated bad request gets a 4xx within seconds, the good streams
end with exactly the tokens of a solo run, and the server's threads and memory come back to where they were."""

import json
import threading
import time

import httpx
import psutil
import pytest
from hypothesis import HealthCheck, given, settings

from tests.server.conftest import API_KEY, LIMITS, health, is_idle, wait_until
from tests.server.hostile_bodies import field_changes, raw_bodies
from tests.server.test_hostile_requests import GOOD, stream_tokens

HEADERS = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}
ANSWER_WITHIN_S = 5.0
RSS_MARGIN = 96 * 1024**2  # allocator caches and hypothesis' own bookkeeping, not a leak per request
FUZZ = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


class GoodStreams:
    """Streams GOOD again and again in a background thread until stopped; each result is kept."""

    def __init__(self, server):
        self.server, self.results, self.stop = server, [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            self.results.append(stream_tokens(self.server, GOOD))

    def __enter__(self) -> "GoodStreams":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(120)


def refused_quickly(http: httpx.Client, path: str, content: bytes) -> None:
    start = time.monotonic()
    response = http.post(path, content=content, headers=HEADERS)
    assert 400 <= response.status_code < 500, (response.status_code, content[:200])
    assert response.json()["error"]["message"]
    assert time.monotonic() - start < ANSWER_WITHIN_S


@pytest.mark.slow
def test_generated_bad_requests_fail_alone(server, demo_engine):
    alone = stream_tokens(server, GOOD)
    process = psutil.Process()
    threads_before, rss_before = threading.active_count(), process.memory_info().rss
    with httpx.Client(base_url=server.url, timeout=30) as http, GoodStreams(server) as streams:

        @FUZZ
        @given(field_changes())
        def bad_fields(case):
            path, body = case
            refused_quickly(http, path, json.dumps(body).encode())

        @settings(FUZZ, max_examples=25)
        @given(raw_bodies(LIMITS.max_body_bytes))
        def bad_bytes(case):
            refused_quickly(http, *case)

        bad_fields()
        bad_bytes()
    assert streams.results and all(tokens == alone for tokens in streams.results)
    assert wait_until(lambda: is_idle(demo_engine))
    assert wait_until(lambda: health(server)["requests_in_flight"] == 0) and not demo_engine._handles
    assert wait_until(lambda: threading.active_count() <= threads_before)
    assert process.memory_info().rss - rss_before < RSS_MARGIN
