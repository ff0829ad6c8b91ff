"""Writing GGUF files (llama.cpp's format) from the Hugging Face checkpoints Wisp supports: `wisp convert-gguf`."""
