import pytest

from engine.gguf.convert import convert
from engine.model_path import DEMO_MODEL


@pytest.fixture(scope="session")
def demo_gguf(tmp_path_factory):
    """The bundled demo model's f32 GGUF twin, converted once per session."""
    return convert(DEMO_MODEL, tmp_path_factory.mktemp("gguf") / "demo-f32.gguf", "f32").path


@pytest.fixture(scope="session")
def gguf_engine(demo_gguf):
    """One llama.cpp engine on the demo twin, shared by the tests that only generate."""
    from engine.api import Engine, EngineOptions

    with Engine(EngineOptions(model=str(demo_gguf), device="cpu", backend="llama.cpp")) as engine:
        yield engine
