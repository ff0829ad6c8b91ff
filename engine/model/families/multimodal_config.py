"""The language model's config of a vision-language checkpoint (its text_config), and what Wisp says of images."""

IMAGES_UNSUPPORTED = "this model also reads images; Wisp runs its language model only, images are not supported yet"
MEDIA_CONFIGS = ("text_config", "vision_config", "audio_config")


def text_config(config: dict) -> dict:
    """The language model's fields; top-level ones (dtype, tie_word_embeddings) fill what text_config lacks."""
    text = config.get("text_config")
    if not isinstance(text, dict):
        return config
    return {**{k: v for k, v in config.items() if k not in MEDIA_CONFIGS}, **text}
