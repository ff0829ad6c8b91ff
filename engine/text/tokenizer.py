"""The tokenizer of a model folder, read with `tokenizers` and behaving like transformers' AutoTokenizer.

`Tokenizer.from_folder` follows what transformers 5 does for a folder with tokenizer.json: the
tokenizer.json pipeline (normalizer, pre-tokenizer, post-processor, decoder) is authoritative, the special
tokens named in tokenizer_config.json (or special_tokens_map.json) are registered as added tokens when
missing, and chat templates come from chat_template.jinja / chat_templates/*.jinja before
tokenizer_config.json. Token ids that only the model config declares (eos lists) come from
generation_config.json and config.json.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tokenizers
from tokenizers import AddedToken

from engine.text.chat_template import ChatTemplate, pick_template, template_source
from engine.text.detokenizer import IncrementalDetokenizer
from engine.errors import TokenizerError

NAMED_SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
ADDED_TOKEN_FIELDS = ("content", "single_word", "lstrip", "rstrip", "normalized", "special")
EXTRA_SPECIAL_TOKEN_KEYS = ("extra_special_tokens", "additional_special_tokens")


@dataclass(frozen=True)
class ModelTokenIds:
    """Token ids the model declares in generation_config.json and config.json (the former wins)."""

    eos_token_ids: frozenset[int] = frozenset()
    bos_token_id: int | None = None
    pad_token_id: int | None = None


class Tokenizer:
    """Encodes, decodes and formats chats exactly as transformers' fast tokenizer for the same folder.

    Attributes: `special_tokens` (name -> token string, HF's special_tokens_map), `special_token_ids`
    (ids that `skip_special_tokens` drops), `eos_token_ids` (every id that ends generation: the
    tokenizer's eos plus the model configs' eos lists), `bos_token_id` and `pad_token_id` (the
    tokenizer's, else the model config's; informational, `encode` already adds what the folder's
    post-processor adds). Read-only after construction.
    """

    def __init__(
        self,
        backend: tokenizers.Tokenizer,
        special_tokens: Mapping[str, str] | None = None,
        chat_templates: Mapping[str, ChatTemplate] | None = None,
        model_token_ids: ModelTokenIds = ModelTokenIds(),
        clean_up_tokenization_spaces: bool = False,
    ):
        """`special_tokens` maps names (bos_token, eos_token, ...) to token strings, as HF's special_tokens_map."""
        self._backend = backend
        self.special_tokens = dict(special_tokens or {})
        self._chat_templates = dict(chat_templates or {})
        # transformers skips the clean-up for BPE models: it would strip real spaces before punctuation.
        self._is_cleaning_up_spaces = clean_up_tokenization_spaces and not isinstance(
            backend.model, tokenizers.models.BPE
        )
        added_tokens = backend.get_added_tokens_decoder()
        self.special_token_ids = frozenset(i for i, token in added_tokens.items() if token.special)
        self.bos_token_id = self._named_token_id("bos_token", model_token_ids.bos_token_id)
        self.pad_token_id = self._named_token_id("pad_token", model_token_ids.pad_token_id)
        eos_token_id = self._named_token_id("eos_token", None)
        tokenizer_eos_ids = frozenset() if eos_token_id is None else frozenset({eos_token_id})
        self.eos_token_ids: frozenset[int] = model_token_ids.eos_token_ids | tokenizer_eos_ids

    @classmethod
    def from_folder(cls, path: Path) -> Tokenizer:
        """Load tokenizer.json (required) and the optional config files next to it.

        Raises TokenizerError naming the file when one is missing, unreadable or malformed.
        """
        folder = Path(path)
        if not folder.is_dir():
            raise TokenizerError(f"{folder} is not a folder; point Wisp at the model folder")
        backend = _load_backend(folder / "tokenizer.json")
        config_path = folder / "tokenizer_config.json"
        config = _read_json(config_path)
        named, extras = _special_tokens(config, _read_json(folder / "special_tokens_map.json"), config_path)
        config_tokens = _config_added_tokens(config, named.values(), config_path)
        _register_added_tokens(backend, config_tokens, [*named.values(), *extras])
        backend.encode_special_tokens = bool(config.get("split_special_tokens", False))
        return cls(
            backend,
            named,
            _load_chat_templates(folder, config),
            _read_model_token_ids(folder),
            bool(config.get("clean_up_tokenization_spaces", False)),
        )

    @property
    def vocab_size(self) -> int:
        """Number of token ids, added tokens included (transformers' `len(tokenizer)`)."""
        return self._backend.get_vocab_size(with_added_tokens=True)

    @property
    def has_chat_template(self) -> bool:
        """Whether the folder ships a chat template; without one, use raw prompts."""
        return bool(self._chat_templates)

    @property
    def chat_template_source(self) -> str:
        """The default chat template's jinja source ("" without one)."""
        return template_source(self._chat_templates)

    @property
    def tool_template_source(self) -> str:
        """The jinja source of the template a request with tools renders with ("" without one)."""
        return template_source(self._chat_templates, has_tools=True)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text`; with `add_special_tokens`, the post-processor's BOS/EOS are added as HF does.
        Through encode_batch, which releases the GIL while it works: a megabyte prompt tokenised on another
        thread (engine.api's tokenizer thread) does not stall the engine thread (encode holds the GIL for seconds)."""
        return self._backend.encode_batch([text], add_special_tokens=add_special_tokens)[0].ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Text of `ids`, equal to transformers' `decode(ids, skip_special_tokens=...)`."""
        text = self._backend.decode(list(ids), skip_special_tokens=skip_special_tokens)
        return _clean_up_tokenization(text) if self._is_cleaning_up_spaces else text

    def to_json(self) -> str:
        """The whole pipeline as tokenizer.json text, added tokens included (what llguidance reads)."""
        return self._backend.to_str()

    def id_to_token(self, token_id: int) -> str | None:
        """The token string of `token_id` (byte-level form for BPE), or None when out of range."""
        return self._backend.id_to_token(token_id)

    def token_to_id(self, token: str) -> int | None:
        """The id of an exact token string, or None when it is not in the vocabulary."""
        return self._backend.token_to_id(token)

    def apply_chat_template(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        **extra: Any,
    ) -> str:
        """The prompt text for a conversation, as transformers' `apply_chat_template(tokenize=False)`.

        `extra` become template variables (e.g. `enable_thinking=False`) and override the special tokens.
        Raises TokenizerError when the model has no usable template, RequestError when the template
        rejects the conversation.
        """
        template = self._select_chat_template(has_tools=tools is not None)
        variables = {**self.special_tokens, **extra}
        return template.render(
            messages, add_generation_prompt=add_generation_prompt, tools=tools, documents=documents, variables=variables
        )

    def encode_chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        **extra: Any,
    ) -> list[int]:
        """Token ids of the rendered conversation; the template writes its own special tokens."""
        text = self.apply_chat_template(messages, add_generation_prompt, tools, documents, **extra)
        return self.encode(text, add_special_tokens=False)

    def detokenizer(self, prompt_ids: Sequence[int] = (), skip_special_tokens: bool = True) -> IncrementalDetokenizer:
        """A streaming decoder for the tokens generated after `prompt_ids`."""
        return IncrementalDetokenizer(self, prompt_ids, skip_special_tokens)

    def _named_token_id(self, name: str, fallback: int | None) -> int | None:
        token = self.special_tokens.get(name)
        token_id = self._backend.token_to_id(token) if token is not None else None
        return token_id if token_id is not None else fallback

    def _select_chat_template(self, has_tools: bool) -> ChatTemplate:
        templates = self._chat_templates
        template = pick_template(templates, has_tools)
        if template is not None:
            return template
        if not templates:
            raise TokenizerError("this model has no chat template; send it a raw prompt instead")
        raise TokenizerError(f"this model has several chat templates ({', '.join(sorted(templates))}) but no 'default'")


def _clean_up_tokenization(text: str) -> str:
    """transformers' `clean_up_tokenization`: join the spaces WordPiece-style decoders put before punctuation."""
    for spaced, joined in _CLEAN_UP_REPLACEMENTS:
        text = text.replace(spaced, joined)
    return text


_CLEAN_UP_REPLACEMENTS = (
    (" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
    (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"),
)  # fmt: skip


def _load_backend(path: Path) -> tokenizers.Tokenizer:
    if not path.is_file():
        raise TokenizerError(f"{path} is missing: Wisp needs the Hugging Face fast-tokenizer file tokenizer.json")
    try:
        backend = tokenizers.Tokenizer.from_file(str(path))
    except Exception as error:  # tokenizers raises a bare Exception for every kind of bad file
        raise TokenizerError(f"{path} is not a valid tokenizer.json: {error}") from error
    # transformers encodes without the truncation/padding a tokenizer.json may carry
    backend.no_truncation()
    backend.no_padding()
    return backend


def _read_json(path: Path) -> dict[str, Any]:
    """The object in an optional JSON file; {} when the file does not exist."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise TokenizerError(f"{path} cannot be read as JSON: {type(error).__name__}: {error}") from None
    if not isinstance(data, dict):
        raise TokenizerError(f"{path} must hold a JSON object, found {type(data).__name__}")
    return data


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TokenizerError(f"{path} cannot be read as UTF-8 text: {error}") from error


def _token_content(value: Any, field: str, path: Path) -> str | None:
    """A token given as a string or as an AddedToken object {"content": ...}."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return value["content"]
    raise TokenizerError(f"{path}: {field} must be a string or an object with a 'content' string, got {value!r}")


def _special_tokens(
    config: Mapping[str, Any], special_tokens_map: Mapping[str, Any], path: Path
) -> tuple[dict[str, str], list[str]]:
    """Named special tokens (bos_token, ..., model-specific *_token) and the extra special tokens."""
    # transformers reads special_tokens_map.json only for configs without added_tokens_decoder, and lets it win
    source = dict(config) if "added_tokens_decoder" in config else {**config, **special_tokens_map}
    named = {key: source[key] for key in NAMED_SPECIAL_TOKENS if source.get(key) is not None}
    named |= {key: value for key, value in config.items() if _is_model_specific_token(key, value)}
    extras: list[Any] = []
    for mapping in (config, special_tokens_map):
        listed = next((mapping[key] for key in EXTRA_SPECIAL_TOKEN_KEYS if mapping.get(key)), [])
        if isinstance(listed, Mapping):
            named |= dict(listed)
        elif isinstance(listed, list):
            extras += listed
        else:
            raise TokenizerError(f"{path}: extra_special_tokens must be a list or an object, got {listed!r}")
    named = {key: _token_content(value, key, path) for key, value in named.items()}
    extra_contents = [_token_content(value, "extra_special_tokens", path) for value in extras]
    return named, list(dict.fromkeys(extra_contents))


def _is_model_specific_token(key: str, value: Any) -> bool:
    """transformers treats any other `*_token` string in the config (image_token, ...) as a named special token."""
    return key.endswith("_token") and key not in NAMED_SPECIAL_TOKENS and isinstance(value, str)


def _config_added_tokens(config: Mapping[str, Any], named: Iterable[str], path: Path) -> list[AddedToken]:
    """The tokens of tokenizer_config.json's added_tokens_decoder, in id order; named special tokens stay special."""
    entries = config.get("added_tokens_decoder") or {}
    if not isinstance(entries, Mapping):
        raise TokenizerError(f"{path}: added_tokens_decoder must be an object mapping ids to tokens")
    named = set(named)
    try:
        ordered = sorted(entries.items(), key=lambda item: int(item[0]))
        return [_added_token(entry, named) for _, entry in ordered]
    except (TypeError, ValueError, KeyError) as error:
        raise TokenizerError(f"{path}: added_tokens_decoder has a malformed entry: {error!r}") from error


def _added_token(entry: Mapping[str, Any], named: set[str]) -> AddedToken:
    token = AddedToken(**{key: entry[key] for key in ADDED_TOKEN_FIELDS if key in entry})
    if token.content in named:
        token.special = True
    return token


def _register_added_tokens(backend: tokenizers.Tokenizer, config_tokens: list[AddedToken], special: list[str]) -> None:
    """Add what transformers adds on load: config tokens that differ and special tokens not yet added."""
    existing = list(backend.get_added_tokens_decoder().values())
    existing_reprs = {repr(token) for token in existing}
    to_add = [token for token in config_tokens if repr(token) not in existing_reprs]
    known = {token.content for token in existing} | {token.content for token in to_add}
    for content in dict.fromkeys(special):
        if content not in known:
            to_add.append(AddedToken(content, special=True))
    if to_add:
        backend.add_tokens(to_add)


def _load_chat_templates(folder: Path, config: Mapping[str, Any]) -> dict[str, ChatTemplate]:
    """Template files win over tokenizer_config.json's chat_template, as in transformers."""
    return _template_files(folder) or _config_templates(config.get("chat_template"), folder / "tokenizer_config.json")


def _template_files(folder: Path) -> dict[str, ChatTemplate]:
    paths = {"default": folder / "chat_template.jinja"}
    paths |= {path.name.removesuffix(".jinja"): path for path in sorted(folder.glob("chat_templates/*.jinja"))}
    return {name: ChatTemplate(_read_text(path), str(path)) for name, path in paths.items() if path.is_file()}


def _config_templates(value: Any, path: Path) -> dict[str, ChatTemplate]:
    """chat_template as one string or as a list of {"name", "template"} objects."""
    if value is None:
        return {}
    if isinstance(value, str):
        return {"default": ChatTemplate(value, f"{path} (chat_template)")}
    is_named_list = isinstance(value, list) and all(
        isinstance(entry, Mapping) and isinstance(entry.get("name"), str) and isinstance(entry.get("template"), str)
        for entry in value
    )
    if not is_named_list:
        raise TokenizerError(f"{path}: chat_template must be a string or a list of {{name, template}} objects")
    return {
        entry["name"]: ChatTemplate(entry["template"], f"{path} (chat_template {entry['name']!r})") for entry in value
    }


def _read_model_token_ids(folder: Path) -> ModelTokenIds:
    eos_token_ids: set[int] = set()
    bos_token_ids: list[int] = []
    pad_token_ids: list[int] = []
    for name in ("generation_config.json", "config.json"):
        path = folder / name
        for section in _config_sections(_read_json(path)):
            eos_token_ids.update(_token_ids(section.get("eos_token_id"), path, "eos_token_id"))
            bos_token_ids += _token_ids(section.get("bos_token_id"), path, "bos_token_id")
            pad_token_ids += _token_ids(section.get("pad_token_id"), path, "pad_token_id")
    return ModelTokenIds(frozenset(eos_token_ids), next(iter(bos_token_ids), None), next(iter(pad_token_ids), None))


def _config_sections(config: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The config and, for multimodal wrappers, its text_config."""
    text_config = config.get("text_config")
    return [config, text_config] if isinstance(text_config, Mapping) else [config]


def _token_ids(value: Any, path: Path, field: str) -> list[int]:
    """An id field that may be absent, one int or a list of ints."""
    values = [] if value is None else value if isinstance(value, list) else [value]
    if not all(isinstance(item, int) and not isinstance(item, bool) for item in values):
        raise TokenizerError(f"{path}: {field} must be an int or a list of ints, got {value!r}")
    return values
