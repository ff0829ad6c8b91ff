"""A tiny model that takes tools the way Qwen3 does: its chat template lists the tools and asks for
`<tool_call>{"name": ..., "arguments": ...}</tool_call>` blocks, replays earlier calls and tool replies, and
`<tool_call>` / `</tool_call>` are added tokens (not special), as in Qwen's tokenizers. Written for these tests
in the form Qwen3's template has; not the published template."""

from __future__ import annotations

from pathlib import Path

from tokenizers import AddedToken

from tests.text.tokenizer_fixtures import save_hf_folder, train_byte_level_tokenizer
from tests.tiny_models import write_tiny_model

TOOL_TEMPLATE = """\
{%- if tools %}
    {{- '<|im_start|>system\\n# Tools\\n<tools>' }}
    {%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}
    {{- '\\n</tools>\\nFor each function call, return a json object with function name and arguments within '
        '<tool_call></tool_call> XML tags.<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role == 'assistant' and message.tool_calls %}
        {{- '<|im_start|>assistant\\n' + message.content }}
        {%- for call in message.tool_calls %}
            {{- '<tool_call>\\n{"name": "' + call.function.name + '", "arguments": ' }}
            {%- if call.function.arguments is string %}{{- call.function.arguments }}
            {%- else %}{{- call.function.arguments | tojson }}{%- endif %}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == 'tool' %}
        {{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"""

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                            "parameters": {"type": "object",
                                                           "properties": {"city": {"type": "string"}}}}}
CALL_REPLY = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def write_tool_model(folder: Path, model_type: str = "qwen3_moe") -> Path:
    write_tiny_model(folder, model_type)
    backend = train_byte_level_tokenizer(300)
    backend.add_tokens([AddedToken("<tool_call>", special=False), AddedToken("</tool_call>", special=False)])
    return save_hf_folder(folder, backend, TOOL_TEMPLATE, eos_token="<|im_end|>", pad_token="<|endoftext|>")
