"""A finished request's error becomes the HTTP status its kind says, whatever its message reads."""

from engine.events import ErrorKind, FinishEvent, RequestStats
from engine.server.outcome import finish_error

STATS = RequestStats(0, 0, 0, 0.0, 0.0, 0.0, 0)


def error_finish(message: str, kind: ErrorKind) -> FinishEvent:
    return FinishEvent("r", "error", "", (), (), STATS, error=message, error_kind=kind)


def test_a_failed_step_is_the_servers_error():
    error = finish_error(error_finish("OutOfMemoryError: CUDA out of memory", ErrorKind.FAILED))
    assert error.status == 500 and error.code == "generation_failed"


def test_a_refused_request_is_the_clients_error_whatever_its_text():
    error = finish_error(error_finish("generation failed: a message that only reads like a failure", ErrorKind.REFUSED))
    assert error.status == 400
