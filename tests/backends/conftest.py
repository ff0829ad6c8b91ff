import pytest


@pytest.fixture(scope="session")
def gguf_engine(demo_gguf):
    """One llama.cpp engine on the demo twin (tests/conftest.py's demo_gguf), shared by the tests that only generate."""
    from engine.api import Engine, EngineOptions

    with Engine(EngineOptions(model=str(demo_gguf), device="cpu", backend="llama.cpp")) as engine:
        yield engine
