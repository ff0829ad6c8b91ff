"""Chat templates rendered exactly as transformers' `apply_chat_template(tokenize=False)` renders them.

The environment mirrors transformers/utils/chat_template_utils.py: a sandboxed jinja2 environment with
trim_blocks, lstrip_blocks, loop controls, the `{% generation %}` tag, HF's `tojson`, `raise_exception`,
`strftime_now`, and the restricted `dict` and `namespace` globals. Templates come from model folders,
so they are untrusted code: never render one outside the sandbox.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import cached_property
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

from engine.text.chat_template_budget import (TemplateBudgetError, bounded_range, check_binary_operation, counted,
                                         render_budget)
from engine.errors import RequestError, TokenizerError

REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


class ChatTemplate:
    """One chat template; `origin` names the file it came from, for error messages.

    It compiles on first use, so a broken template only breaks chat formatting, not raw prompts.
    """

    def __init__(self, source: str, origin: str):
        self.source = source
        self.origin = origin

    @cached_property
    def _template(self) -> jinja2.Template:
        try:
            return _ENVIRONMENT.from_string(self.source)
        except jinja2.TemplateSyntaxError as error:
            raise TokenizerError(
                f"{self.origin}: the chat template is not valid jinja (line {error.lineno}): {error.message}"
            ) from error

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool,
        tools: Sequence[Mapping[str, Any]] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        variables: Mapping[str, Any] | None = None,
    ) -> str:
        """Render a conversation; `variables` are extra template variables (special tokens, enable_thinking, ...).

        Raises RequestError when the conversation is empty or the template rejects it
        (e.g. `raise_exception("Conversation roles must alternate ...")`), TokenizerError when the
        template does not compile.
        """
        if not messages:
            raise RequestError("cannot apply a chat template to an empty conversation")
        _check_tools(tools)
        try:
            with render_budget():
                return counted(self._template.generate(
                    messages=_alias_reasoning_fields(_plain_data(_drop_none_values(messages))),
                    tools=_plain_data(tools),
                    documents=_plain_data(documents),
                    add_generation_prompt=add_generation_prompt,
                    **_plain_data(dict(variables or {})),
                ))
        except TemplateBudgetError as error:
            message = (f"the chat template in {self.origin} was stopped: {error}; a chat template should only "
                       "format the conversation (is the model folder's template broken?)")
            raise TokenizerError(message) from None
        except jinja2.TemplateError as error:
            raise RequestError(f"the chat template in {self.origin} rejected the conversation: {error}") from error


def pick_template(templates: Mapping[str, ChatTemplate], has_tools: bool) -> ChatTemplate | None:
    """The template a conversation renders with: the "tool_use" one when it offers tools and the model has one,
    else "default" (None when there is none)."""
    if has_tools and "tool_use" in templates:
        return templates["tool_use"]
    return templates.get("default")


def template_source(templates: Mapping[str, ChatTemplate], has_tools: bool = False) -> str:
    """pick_template's jinja source, "" without one: it tells which reasoning, tool-call and switch variables the
    model's prompts take (engine.generation)."""
    template = pick_template(templates, has_tools)
    return template.source if template is not None else ""


def _drop_none_values(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """transformers drops None-valued keys: templates handle a missing key better than `content=None`."""
    for message in messages:
        if not isinstance(message, Mapping):
            raise RequestError(f"chat messages must be dicts with 'role' and 'content', got {message!r}")
    return [{key: value for key, value in message.items() if value is not None} for message in messages]


def _check_tools(tools: Sequence[Any] | None) -> None:
    for tool in tools or ():
        if not isinstance(tool, Mapping):
            raise RequestError(f"tools must be JSON-schema dicts, got {tool!r}")


def _alias_reasoning_fields(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fill `reasoning_content` (and `thinking`, read by gpt-oss templates) from any of its older names."""
    aliased = []
    for message in messages:
        reasoning = next((message[key] for key in REASONING_FIELDS if message.get(key) is not None), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        aliased.append(message)
    return aliased


_SCALAR_CONVERSIONS = ((str, str.__str__), (int, int.__int__), (float, float.__float__))


def _plain_data(value: Any) -> Any:
    """Rebuild `value` from plain JSON types, so the template never sees objects with unsafe methods."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    for plain_type, to_plain in _SCALAR_CONVERSIONS:
        if isinstance(value, plain_type):
            return to_plain(value)
    if isinstance(value, Mapping):
        return {_plain_data(key): _plain_data(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain_data(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_plain_data(item) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _plain_data(getattr(value, field.name)) for field in dataclasses.fields(value)}
    return f"<{type(value).__name__}>"


def _raise_exception(message: str) -> None:
    raise jinja2.TemplateError(message)


def _tojson(value: Any, ensure_ascii=False, indent=None, separators=None, sort_keys=False) -> str:
    """HF's tojson: unlike jinja's built-in, it does not HTML-escape and it takes json.dumps' options."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


class _TemplateDict:
    """`dict(...)` for templates without exposing the dict type itself."""

    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(jinja2.utils.Namespace):
    """jinja's namespace, refusing underscore names that would reach CPython internals."""

    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"chat templates cannot set underscore attributes, got {name!r}")


class _GenerationTag(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` marks assistant text for training masks; rendering ignores it."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


class _BoundedSandbox(ImmutableSandboxedEnvironment):
    """The sandbox with the render budget's range() and checked `*` and `**` (engine.text.chat_template_budget)."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context, operator, left, right):
        check_binary_operation(operator, left, right)
        return super().call_binop(context, operator, left, right)


def _make_environment() -> ImmutableSandboxedEnvironment:
    environment = _BoundedSandbox(
        trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, jinja2.ext.loopcontrols]
    )
    environment.filters["tojson"] = _tojson
    environment.globals["raise_exception"] = _raise_exception
    environment.globals["strftime_now"] = _strftime_now
    environment.globals["dict"] = _TemplateDict()
    environment.globals["namespace"] = _TemplateNamespace
    environment.globals["range"] = bounded_range
    return environment


_ENVIRONMENT = _make_environment()
