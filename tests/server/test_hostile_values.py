"""Well-formed values that once hurt every request in flight: each is answered alone, and a good stream beside
it ends with exactly the tokens it gets alone."""

import pytest

from tests.server.good_stream import beside_a_good_stream
from tests.server.test_hostile_requests import CHAT, post


@pytest.mark.parametrize("values", [
    {"temperature": 1e-40}, {"temperature": 5e-324}, {"top_p": 1e-300}, {"temperature": 1e-40, "top_p": 5e-324},
])
def test_tiny_temperature_or_top_p_answers_and_spares_the_batch(server, values):
    body = {**CHAT, "max_tokens": 8, **values}
    responses = beside_a_good_stream(server, lambda: [post(server, body) for _ in range(3)])
    assert [response.status_code for response in responses] == [200] * 3
    assert {response.json()["choices"][0]["finish_reason"] for response in responses} <= {"stop", "length"}

