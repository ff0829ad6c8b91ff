"""A good stream running beside hostile requests must end with exactly the tokens it gets alone."""

from concurrent.futures import ThreadPoolExecutor

from tests.server.test_hostile_requests import GOOD, stream_tokens


def beside_a_good_stream(server, hostile, body: dict = GOOD):
    """Run `hostile()` while a good stream is in flight; returns what it returned, once the stream is checked."""
    alone = stream_tokens(server, body)
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(stream_tokens, server, body)
        outcome = hostile()
        assert running.result(timeout=120) == alone and len(alone) == body["max_tokens"]
    return outcome
