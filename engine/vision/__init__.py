"""Images in: decoding and checking encoded image bytes (Pillow), preprocessing as the model's own processor does,
the vision tower that turns an image into language-model embeddings, and the placement of an image's tokens in a
prompt (their count, M-RoPE positions and prefix-cache keys)."""
