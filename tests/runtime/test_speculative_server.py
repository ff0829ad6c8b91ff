"""The server's per-request "speculative" field and the drafts in its usage report."""

import openai
import pytest

from tests.server.conftest import client, demo_engine, server  # noqa: F401 - the server's fixtures

PROMPT = "for i in range(10):\n    print(i)\nfor i in range(10):\n    print(i)\nfor i in range(10):\n"


def completion(client, speculative):  # noqa: F811
    raw = client.completions.with_raw_response.create(model="wisp-demo", prompt=PROMPT, max_tokens=24,
                                                      temperature=0, extra_body={"speculative": speculative})
    return raw.http_response.json()


def test_a_request_drafts_and_reports_it_with_the_same_text(client):  # noqa: F811
    drafted, plain = completion(client, "ngram"), completion(client, "off")
    assert drafted["choices"][0]["text"] == plain["choices"][0]["text"]
    assert drafted["usage"]["spec_proposed"] > 0 and drafted["usage"]["spec_accepted"] >= 0
    assert plain["usage"]["spec_proposed"] == 0


def test_an_unknown_speculative_value_is_a_400_naming_the_field(client):  # noqa: F811
    with pytest.raises(openai.BadRequestError) as error:
        completion(client, "mtp")
    assert "speculative" in str(error.value)
