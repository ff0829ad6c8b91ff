"""Wisp's inference engine: runs MoE checkpoints with a paged expert working set. Never imports Qt."""

__version__ = "0.1.0"
