"""User-facing error types. The CLI and the app catch WispError at the edge and show its message."""


class WispError(Exception):
    """An error a user can act on; its message names the file, field or number at fault."""


class ModelFormatError(WispError):
    """A model folder or file is missing, unreadable, truncated or inconsistent."""


class UnsupportedModelError(WispError):
    """The checkpoint is readable but its architecture is not one the engine runs."""


class TokenizerError(WispError):
    """The tokenizer files are missing or unusable."""


class PromptTooLongError(WispError):
    """The prompt does not fit the model's context window."""


class BudgetError(WispError):
    """The device memory budget is too small for the model or malformed."""


class RequestError(WispError):
    """A generation request is malformed (bad sampling values, empty prompt, ...). `field` names the value at
    fault in the server's dotted form ("messages.0.content", "seed"), None when it is the request as a whole."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class HostMemoryError(WispError):
    """The host has too little RAM to hold the model's experts."""
