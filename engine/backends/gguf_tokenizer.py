"""The tokenizer of a GGUF model as Wisp's runtime uses one (encode, chat template, streaming decode), backed by
llama.cpp's own tokenizer: a GGUF file carries its vocabulary, not a tokenizer.json."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.backends.llama_cpp_model import LlamaCppModel
from engine.text.chat_template import ChatTemplate, pick_template, template_source
from engine.text.detokenizer import IncrementalDetokenizer
from engine.errors import TokenizerError

SPECIAL_TOKEN_NAMES = {"bos_token": "bos", "eos_token": "eos", "pad_token": "pad"}  # llama.cpp has no unk getter


class GgufTokenizer:
    """Engine thread only (it calls into the loaded llama.cpp model)."""

    def __init__(self, model: LlamaCppModel, chat_templates: Mapping[str, str], origin: str):
        self._model = model
        self._templates = {name: ChatTemplate(source, f"{origin} (tokenizer.chat_template"
                                              f"{'' if name == 'default' else '.' + name})")
                           for name, source in chat_templates.items()}
        self.special_token_ids = model.control_token_ids()
        self.special_tokens = {key: model.token_text(token_id) for key, name in SPECIAL_TOKEN_NAMES.items()
                               if (token_id := model.special_id(name)) is not None}

    @property
    def vocab_size(self) -> int:
        """Token ids at or past it are refused at admission (engine.runtime.prompt)."""
        return self._model.n_vocab

    @property
    def has_chat_template(self) -> bool:
        return bool(self._templates)

    @property
    def chat_template_source(self) -> str:
        return template_source(self._templates)

    @property
    def tool_template_source(self) -> str:
        return template_source(self._templates, has_tools=True)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """As the GGUF's metadata says (add_bos_token); special-token text is parsed, as Hugging Face does."""
        return self._model.tokenize(text, add_special=add_special_tokens)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        kept = [i for i in ids if i not in self.special_token_ids] if skip_special_tokens else list(ids)
        return self._model.detokenize(kept, render_special=True) if kept else ""

    def encode_chat(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True,
                    tools: Sequence[Mapping[str, Any]] | None = None, **extra: Any) -> list[int]:
        """The template writes its own special tokens (BOS included), so none are added here."""
        template = self._select(has_tools=tools is not None)
        text = template.render(messages, add_generation_prompt=add_generation_prompt, tools=tools,
                               variables={**self.special_tokens, **extra})
        return self.encode(text, add_special_tokens=False)

    def detokenizer(self, prompt_ids: Sequence[int] = (), skip_special_tokens: bool = True) -> IncrementalDetokenizer:
        return IncrementalDetokenizer(self, prompt_ids, skip_special_tokens)

    def _select(self, has_tools: bool) -> ChatTemplate:
        template = pick_template(self._templates, has_tools)
        if template is None:
            raise TokenizerError("this GGUF file has no chat template (tokenizer.chat_template); "
                                 "send it a raw prompt instead")
        return template
