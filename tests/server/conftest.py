"""One demo-model engine behind one real server on loopback, shared by the server tests."""

import time

import httpx
import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from engine.api import Engine, EngineOptions  # noqa: E402
from engine.server import ServerLimits, start_server  # noqa: E402

API_KEY = "test-key"
LIMITS = ServerLimits(max_body_bytes=64 * 1024, max_tokens=512, max_concurrent_requests=32)


@pytest.fixture(scope="session")
def demo_engine():
    engine = Engine(EngineOptions(model=None, device="cpu"))
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def server(demo_engine):
    handle = start_server(demo_engine, "127.0.0.1", 0, api_key=API_KEY, limits=LIMITS)
    yield handle
    handle.stop()


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=server.url, api_key=API_KEY, max_retries=0, timeout=60)


def wait_until(predicate, timeout_s: float = 10.0) -> bool:
    """Poll a condition that another thread makes true (the engine publishes stats after every step)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def is_idle(engine) -> bool:
    stats = engine.stats()
    return stats.running == 0 and stats.waiting == 0


def health(server, key: str | None = API_KEY) -> dict:
    """GET /health, with the key (the model and load are only shown to holders of the key) unless None."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.get(server.url.removesuffix("/v1") + "/health", headers=headers).json()


@pytest.fixture(autouse=True)
def nothing_left_in_flight(request):
    """After each test on the shared server, every request it made has released its slot: a leak fails the test
    that caused it instead of a later one that counts the server's load."""
    yield
    if "server" in request.fixturenames:
        server = request.getfixturevalue("server")
        assert wait_until(lambda: health(server)["requests_in_flight"] == 0, 15), \
            f"requests still in flight 15 s after the test: {health(server)['requests_in_flight']}"
