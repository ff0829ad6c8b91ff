"""A `<tool_call>` block's arguments as they are generated: `CallStream` reads the block's text so far and says
what it adds to the call (its name once known, then pieces of the arguments JSON), so that the pieces joined are
the arguments text the finished block parses to (engine.generation.tool_calls.parse_call: the arguments object
written again by json.dumps, or the XML form's parameters as such an object). A block whose arguments cannot be
followed (a name after the arguments, arguments given as a JSON string) adds nothing until it ends."""

from __future__ import annotations

import json
import re

NAME_FIRST = re.compile(r'\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"(?:arguments|parameters)"\s*:\s*', re.S)
XML_NAME = re.compile(r"\s*<function=([^>\s]+)>")
XML_PARAMETER = re.compile(r"<parameter=([^>\s]+)>\n?(.*?)\n?</parameter>", re.S)
PUNCTUATION = {"{": "{", "}": "}", "[": "[", "]": "]", ":": ": ", ",": ", "}  # json.dumps' separators
HIGH_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}$")
PARTIAL_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{0,3})?$")


def json_or_text(value: str):
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return value


class JsonRewriter:
    """Incremental json.dumps(json.loads(text), ensure_ascii=False) of one JSON object or array: `feed` the text
    so far (each call a longer prefix of the same text) -> what its settled part adds. Whitespace goes, separators
    become json.dumps' own, strings and numbers are written again from their values; a string streams as it grows.
    `is_broken` when the text is not JSON this can follow (nothing more is added then)."""

    def __init__(self):
        self._at = 0  # how far the text is consumed
        self._depth = 0
        self._string_at: int | None = None  # inside a string: where its unwritten content starts
        self.is_done = self.is_broken = False

    def feed(self, text: str) -> str:
        out = []
        while not (self.is_done or self.is_broken):
            piece = self._string(text) if self._string_at is not None else self._token(text)
            if piece is None:
                break
            out.append(piece)
        return "".join(out)

    def _token(self, text: str) -> str | None:
        while self._at < len(text) and text[self._at].isspace():
            self._at += 1
        if self._at >= len(text):
            return None
        char = text[self._at]
        if char == '"':
            self._at += 1
            self._string_at = self._at
            return '"'
        if char in PUNCTUATION:
            self._at += 1
            self._depth += 1 if char in "{[" else -1 if char in "}]" else 0
            self.is_done = self._depth == 0
            return PUNCTUATION[char]
        return self._scalar(text)

    def _scalar(self, text: str) -> str | None:
        """A number, true, false or null: settled once a character that cannot continue it follows."""
        end = self._at
        while end < len(text) and (text[end].isalnum() or text[end] in "+-."):
            end += 1
        if end >= len(text):
            return None
        try:
            value = json.loads(text[self._at:end])
        except ValueError:
            self.is_broken = True
            return None
        self._at = end
        return json.dumps(value)

    def _string(self, text: str) -> str | None:
        end = self._string_at
        while end < len(text) and text[end] != '"':
            end += 2 if text[end] == "\\" else 1
        is_closed = end < len(text)
        raw = text[self._string_at:min(end, len(text))]
        if not is_closed:  # hold back an escape that is not whole yet, and a surrogate that may have a pair
            raw = raw[:len(raw) - len(_held_escape(raw))]
        if not raw and not is_closed:
            return None
        try:
            written = json.dumps(json.loads('"' + raw + '"'), ensure_ascii=False)[1:-1]
        except ValueError:
            self.is_broken = True
            return None
        self._string_at += len(raw)
        if is_closed:
            self._at, self._string_at = end + 1, None
            return written + '"'
        return written


def _held_escape(raw: str) -> str:
    """The end of a growing string's text that cannot be written yet: an escape that is not whole, and a high
    surrogate escape before it or at the end (its pair may follow)."""
    held = _unescaped_match(PARTIAL_ESCAPE, raw)
    return _unescaped_match(HIGH_SURROGATE_ESCAPE, raw[:len(raw) - len(held)]) + held


def _unescaped_match(pattern: re.Pattern, raw: str) -> str:
    match = pattern.search(raw)
    if match is None:
        return ""
    before = raw[:match.start()]
    return "" if (len(before) - len(before.rstrip("\\"))) % 2 else match.group(0)


class CallStream:
    """One `<tool_call>` block as it streams (engine thread): `feed` the block's text so far -> (the call's name
    when it is first known else None, the arguments text it adds)."""

    def __init__(self):
        self.name: str | None = None
        self._arguments_at = 0
        self._json: JsonRewriter | None = None
        self._num_parameters = 0
        self._is_xml = self._is_closed = self._is_off = False

    def feed(self, body: str) -> tuple[str | None, str]:
        if self._is_off:
            return None, ""
        is_new = self.name is None
        if is_new and not self._read_name(body):
            return None, ""
        added = self._xml_arguments(body) if self._is_xml else self._json_arguments(body)
        return (self.name if is_new else None), added

    def _read_name(self, body: str) -> bool:
        if body.lstrip().startswith("<"):
            match = XML_NAME.match(body)
            self._is_xml = True
            if match is not None:
                self.name, self._arguments_at = match.group(1), match.end()
            self._is_off = match is None and ">" in body
            return match is not None
        match = NAME_FIRST.match(body)
        if match is None:
            return False
        self.name, self._arguments_at = json.loads(match.group(1)), match.end()
        self._json = JsonRewriter()
        return True

    def _json_arguments(self, body: str) -> str:
        arguments = body[self._arguments_at:]
        first = arguments.lstrip()[:1]
        if first and first not in "{[":  # arguments as a JSON string: the call carries the string's text
            self._is_off = True
            return ""
        return self._json.feed(arguments)

    def _xml_arguments(self, body: str) -> str:
        parameters = list(XML_PARAMETER.finditer(body, self._arguments_at))
        pieces = []
        for match in parameters[self._num_parameters:]:
            key, value = match.group(1), json_or_text(match.group(2))
            pieces.append(("{" if self._num_parameters == 0 else ", ") + json.dumps(key, ensure_ascii=False)
                          + ": " + json.dumps(value, ensure_ascii=False))
            self._num_parameters += 1
        if not self._is_closed and "</function>" in body[self._arguments_at:]:
            pieces.append("}" if self._num_parameters else "{}")
            self._is_closed = True
        return "".join(pieces)
