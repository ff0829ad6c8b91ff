"""Fields other local servers take: ignored with a `Warning` header, or a 400 naming the one that would change the
answer; and any `model` name reaches the one model served."""

import json

import openai
import pytest

from engine.server.api_errors import ApiError
from engine.server.extra_fields import check_extra_fields, ignored_warning, warning_header

CHAT = [{"role": "user", "content": "hi"}]


def test_unknown_fields_are_named_for_the_warning():
    assert check_extra_fields({"cache_prompt": True, "typical_p": 1.0, "mirostat": 0, "repeat_last_n": 64}) == [
        "cache_prompt", "repeat_last_n"]


@pytest.mark.parametrize("name, value", [("typical_p", 0.9), ("mirostat", 2), ("use_beam_search", True),
                                         ("guided_regex", "[a-z]+"), ("min_tokens", 5)])
def test_a_field_that_would_change_the_answer_is_400(name, value):
    with pytest.raises(ApiError) as excinfo:
        check_extra_fields({name: value})
    assert excinfo.value.status == 400 and excinfo.value.param == name


def test_the_warning_header_is_one_ascii_line_whatever_the_names():
    names = [f"field\n{i}\u00e9\"" for i in range(20)]
    value = warning_header(ignored_warning(names))["Warning"]
    assert value.isascii() and "\n" not in value and value.startswith("299 wisp ")
    assert "and 12 more" in json.loads(value.removeprefix("299 wisp "))


def test_a_placeholder_model_name_reaches_the_served_model(client):
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=CHAT, max_tokens=4,
                                                           temperature=0)
    assert raw.parse().model == "wisp-demo" and "gpt-4o-mini" in raw.headers["warning"]
    assert [model.id for model in client.models.list().data] == ["wisp-demo"]


def test_unknown_fields_are_ignored_with_a_warning_streamed_and_not(client):
    extra = {"cache_prompt": True, "typical_p": 1.0, "n_keep": 4}
    raw = client.completions.with_raw_response.create(model="wisp-demo", prompt="def f(", max_tokens=4,
                                                      extra_body=extra)
    assert raw.parse().choices[0].text and "cache_prompt, n_keep" in raw.headers["warning"]
    with client.chat.completions.with_streaming_response.create(model="wisp-demo", messages=CHAT, max_tokens=4,
                                                                stream=True, extra_body=extra) as stream:
        assert "cache_prompt, n_keep" in stream.headers["warning"]
        assert any(chunk.choices for chunk in stream.parse())


def test_a_known_field_it_cannot_honour_is_400_naming_it(client):
    with pytest.raises(openai.BadRequestError) as excinfo:
        client.chat.completions.create(model="wisp-demo", messages=CHAT, max_tokens=4, extra_body={"mirostat": 2})
    assert excinfo.value.body["param"] == "mirostat"
