"""GGUF files (llama.cpp's format): writing them from Hugging Face checkpoints (`wisp convert-gguf`) and reading
them for Wisp's own engine (model_file, weights, tokenizer)."""
