"""Chat and coding-assistant conversations: storage, the open conversation, generation, and their widgets."""
