"""The app as an MCP host: the servers the user configured, their tools offered to a tool-capable model, and each
call the model makes run (after the user allows it) on a worker thread and fed back into the chat."""
