"""What vision-language checkpoints share: their config.json holds the language model's fields under text_config
(and the tower's under vision_config, engine.vision)."""


def text_config(config: dict) -> dict:
    """The language model's fields; top-level ones (dtype, tie_word_embeddings) fill what text_config lacks."""
    text = config.get("text_config")
    if not isinstance(text, dict):
        return config
    return {**{k: v for k, v in config.items() if k not in ("text_config", "vision_config")}, **text}
