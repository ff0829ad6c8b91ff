"""The clients people connect, installed as test dependencies, against a real server on loopback: the openai client
(async and streaming), LangChain's ChatOpenAI (with_structured_output, bind_tools) and instructor, on the demo model
and on a tiny tool-taking Qwen3-shaped model."""

from __future__ import annotations

import asyncio
import json
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from engine.api import Engine, EngineOptions
from engine.server import start_server
from tests.generation.tool_fixtures import write_tool_model
from tests.server.conftest import API_KEY

openai = pytest.importorskip("openai")
CHAT = [{"role": "user", "content": "Name a colour."}]


class Forecast(BaseModel):
    """A forecast request."""

    unit: Literal["C", "F"]
    days: int = Field(ge=1, le=7)


class Colour(BaseModel):
    name: str = Field(max_length=12)
    is_warm: bool


@pytest.fixture(scope="module")
def tool_server(tmp_path_factory):
    """A real server over a tiny model whose chat template takes tools (context widened for the tool schemas)."""
    folder = write_tool_model(tmp_path_factory.mktemp("client_tool_model"))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 2048}))
    with Engine(EngineOptions(model=str(folder), device="cpu")) as engine:
        handle = start_server(engine, "127.0.0.1", 0, api_key=API_KEY)
        yield handle
        handle.stop()


def test_async_client_whole_and_streamed(server):
    async def ask() -> tuple[str, str]:
        client = openai.AsyncOpenAI(base_url=server.url, api_key=API_KEY, max_retries=0)
        whole = await client.chat.completions.create(model="gpt-4o-mini", messages=CHAT, max_tokens=12,
                                                     temperature=0)
        stream = await client.chat.completions.create(model="gpt-4o-mini", messages=CHAT, max_tokens=12,
                                                      temperature=0, stream=True)
        parts = [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
        return whole.choices[0].message.content, "".join(parts)

    whole, streamed = asyncio.run(ask())
    assert whole and whole == streamed


def test_openai_tools_with_a_required_choice(tool_server):
    client = openai.OpenAI(base_url=tool_server.url, api_key=API_KEY, max_retries=0)
    tool = openai.pydantic_function_tool(Forecast)
    response = client.chat.completions.create(model="gpt-4o-mini", messages=CHAT, tools=[tool],
                                              tool_choice="required", max_tokens=60, temperature=0.7, seed=1)
    (call,) = response.choices[0].message.tool_calls
    assert call.function.name == "Forecast" and Forecast.model_validate_json(call.function.arguments)


def test_openai_streams_a_tool_calls_arguments_as_they_are_generated(tool_server):
    client = openai.OpenAI(base_url=tool_server.url, api_key=API_KEY, max_retries=0)
    ask = dict(model="gpt-4o-mini", messages=CHAT, tools=[openai.pydantic_function_tool(Forecast)],
               tool_choice="required", max_tokens=60, temperature=0)
    (whole,) = client.chat.completions.create(**ask).choices[0].message.tool_calls
    pieces = [call for chunk in client.chat.completions.create(**ask, stream=True) if chunk.choices
              for call in chunk.choices[0].delta.tool_calls or ()]
    first, rest = pieces[0], pieces[1:]
    assert (first.index, first.type, first.function.name) == (0, "function", "Forecast") and first.id
    assert len([piece for piece in rest if piece.function.arguments]) > 1
    assert all(piece.index == 0 and piece.id is None for piece in rest)
    arguments = "".join(piece.function.arguments or "" for piece in pieces)
    assert arguments == whole.function.arguments and json.loads(arguments) == json.loads(whole.function.arguments)


def test_langchain_with_structured_output_and_bound_tools(server, tool_server):
    langchain_openai = pytest.importorskip("langchain_openai")
    demo = langchain_openai.ChatOpenAI(base_url=server.url, api_key=API_KEY, model="gpt-4o-mini", temperature=0,
                                       max_tokens=120, max_retries=0)
    colour = demo.with_structured_output(Colour).invoke("Name a colour.")
    assert isinstance(colour, Colour)
    tools = langchain_openai.ChatOpenAI(base_url=tool_server.url, api_key=API_KEY, model="gpt-4o-mini",
                                        temperature=0.7, max_tokens=60, max_retries=0, seed=2)
    message = tools.bind_tools([Forecast], tool_choice="Forecast").invoke("Forecast for Oslo?")
    (call,) = message.tool_calls
    assert call["name"] == "Forecast" and Forecast.model_validate(call["args"])
    forecast = tools.with_structured_output(Forecast, method="function_calling").invoke("Forecast for Oslo?")
    assert isinstance(forecast, Forecast)


def test_instructor_tools_and_json_schema_modes(server, tool_server):
    instructor = pytest.importorskip("instructor")
    tools = instructor.from_openai(openai.OpenAI(base_url=tool_server.url, api_key=API_KEY, max_retries=0),
                                   mode=instructor.Mode.TOOLS)
    forecast = tools.chat.completions.create(model="gpt-4o-mini", response_model=Forecast, messages=CHAT,
                                             max_tokens=60, temperature=0.7, seed=3, max_retries=0)
    assert isinstance(forecast, Forecast)
    schema = instructor.from_openai(openai.OpenAI(base_url=server.url, api_key=API_KEY, max_retries=0),
                                    mode=instructor.Mode.JSON_SCHEMA)
    colour = schema.chat.completions.create(model="gpt-4o-mini", response_model=Colour, messages=CHAT,
                                            max_tokens=120, temperature=0, max_retries=0)
    assert isinstance(colour, Colour)
