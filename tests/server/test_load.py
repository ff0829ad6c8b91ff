"""A bounded load test: 16 concurrent streaming clients get exactly the text each prompt gets alone
(continuous batching is batch-invariant), and the server is healthy afterwards."""

import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from tests.server.conftest import health, is_idle, wait_until

QUESTIONS = ["What is the json module for?", "How do I sort a list?", "What is a decorator?", "Explain asyncio."]
NUM_CLIENTS = 16
MAX_TOKENS = 24


def stream_answer(client, question: str) -> tuple[str, float]:
    start = time.perf_counter()
    stream = client.chat.completions.create(model="wisp-demo", messages=[{"role": "user", "content": question}],
                                            max_tokens=MAX_TOKENS, temperature=0, stream=True)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    return text, time.perf_counter() - start


def test_sixteen_concurrent_streams_match_their_solo_answers(client, server, demo_engine):
    alone = {question: stream_answer(client, question)[0] for question in QUESTIONS}
    questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(NUM_CLIENTS)]
    start = time.perf_counter()
    with ThreadPoolExecutor(NUM_CLIENTS) as pool:
        results = list(pool.map(lambda question: stream_answer(client, question), questions))
    wall = time.perf_counter() - start
    assert [text for text, _ in results] == [alone[question] for question in questions]
    latencies = sorted(latency for _, latency in results)
    p95 = latencies[min(len(latencies) - 1, round(0.95 * len(latencies)) - 1)]
    print(f"\nload: {NUM_CLIENTS} streaming clients x {MAX_TOKENS} tokens: {NUM_CLIENTS / wall:.2f} requests/s, "
          f"latency p50 {statistics.median(latencies):.2f} s, p95 {p95:.2f} s, wall {wall:.2f} s")
    assert wait_until(lambda: is_idle(demo_engine))
    # A client has its whole stream a moment before the server's handler, after its last write, releases the slot.
    assert wait_until(lambda: health(server)["requests_in_flight"] == 0)
    assert health(server) == {"status": "ok", "model": "wisp-demo", "requests_in_flight": 0}
    assert client.completions.create(model="wisp-demo", prompt="x", max_tokens=2).usage.completion_tokens >= 1
