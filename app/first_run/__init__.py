"""The first run: the welcome dialog (hardware, models, a recommended plan, privacy) and the build self-test."""
