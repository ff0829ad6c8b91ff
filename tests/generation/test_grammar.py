"""What the grammar module hands llguidance: object schemas closed unless they say otherwise."""

from engine.generation.grammar import closed_objects


def test_objects_are_closed_unless_the_schema_says_otherwise():
    schema = {"type": "object", "properties": {"properties": {"type": "object", "properties": {"a": {}}},
                                               "open": {"type": "object", "properties": {},
                                                        "additionalProperties": True}},
              "$defs": {"properties": {"type": "string"}}}
    closed = closed_objects(schema)
    assert closed["additionalProperties"] is False
    assert closed["properties"]["properties"]["additionalProperties"] is False
    assert "additionalProperties" not in closed["properties"]["properties"]["properties"]
    assert closed["properties"]["open"]["additionalProperties"] is True and closed["$defs"] == schema["$defs"]
