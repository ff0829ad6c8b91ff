"""Text in and out: the tokenizer, the chat template and its budget, the detokenizer."""
