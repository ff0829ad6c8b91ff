"""Wisp's PySide6 desktop app. It talks to the engine only through `engine.api`, imported lazily (app.engine_api)
so that the window opens before torch has finished importing."""
