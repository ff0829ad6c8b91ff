"""Structured output on the demo model: whatever the JSON schema, the reply parses and the schema accepts it
(a property test over random schemas); and a grammar the model cannot compile is the request's error alone."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams

pytest.importorskip("llguidance")
jsonschema = pytest.importorskip("jsonschema")


@pytest.fixture(scope="module")
def demo():
    with Engine(EngineOptions(model=None, device="cpu")) as engine:
        yield engine


def leaf_schemas() -> st.SearchStrategy[dict]:
    bounded_int = st.integers(-1000, 1000).flatmap(
        lambda low: st.integers(low, low + 10_000).map(lambda high: {"type": "integer", "minimum": low,
                                                                     "maximum": high}))
    words = st.lists(st.text("abcxyz", min_size=1, max_size=6), min_size=1, max_size=4, unique=True)
    return st.one_of(
        st.integers(0, 12).map(lambda n: {"type": "string", "maxLength": n}),
        bounded_int,
        st.just({"type": "boolean"}),
        words.map(lambda values: {"enum": values}),
        st.integers(0, 3).map(lambda n: {"type": "array", "items": {"type": "boolean"}, "maxItems": n}),
    )


def object_schema(values: st.SearchStrategy[dict]) -> st.SearchStrategy[dict]:
    names = st.text("abcdefgh_", min_size=1, max_size=8)
    return st.dictionaries(names, values, min_size=1, max_size=4).map(
        lambda properties: {"type": "object", "properties": properties, "required": sorted(properties),
                            "additionalProperties": False})


SCHEMAS = st.recursive(leaf_schemas(), object_schema, max_leaves=6).filter(lambda s: s.get("type") == "object")


def reply(engine, schema: dict, seed: int, **fields):
    sampling = SamplingParams(max_tokens=400, temperature=1.0, seed=seed, json_schema=json.dumps(schema), **fields)
    return engine.generate(GenerateRequest(prompt="Here is the record as JSON:", sampling=sampling))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(schema=SCHEMAS, seed=st.integers(0, 2**32))
def test_replies_always_parse_against_their_schema(demo, schema, seed):
    finish = reply(demo, schema, seed)
    assert finish.error is None and finish.reason == "stop", (finish.reason, finish.text)
    jsonschema.validate(json.loads(finish.text), schema)


def test_json_object_mode_writes_an_object_until_done_or_cut(demo):
    """Any object: its strings are unbounded, so a reply may end at max_tokens like any other (OpenAI's too)."""
    for seed in range(3):
        finish = reply(demo, {"type": "object"}, seed, repetition_penalty=1.3, presence_penalty=0.5)
        assert finish.text.startswith("{")
        assert finish.reason == "length" or isinstance(json.loads(finish.text), dict)


def test_a_schema_llguidance_cannot_compile_fails_that_request_alone(demo):
    bad = GenerateRequest(prompt="x", sampling=SamplingParams(json_schema='{"type": "no-such-type"}'))
    refused = demo.generate(bad)
    assert refused.reason == "error" and "JSON schema" in refused.error
    ok = demo.generate(GenerateRequest(prompt="x", sampling=SamplingParams(max_tokens=3)))
    assert ok.error is None
