"""After Stop the memory panel's live charts settle as they do after a reply that ends by itself: the decode chart
falls to 0 tok/s instead of repeating the last rate while the engine sits idle."""

from PySide6.QtCore import Qt

from tests.app.driving import type_and_send, use_greedy_sampling, wait_until_idle

WINDOW_S = 3.0  # engine.generation.throughput.Throughput's window: an idle engine reads 0 after it


def test_the_decode_chart_falls_to_zero_after_stop(qtbot, start_app):
    window = start_app()
    chart = window.memory_panel.decode_chart
    use_greedy_sampling(window, max_tokens=2000, system_prompt="")
    with qtbot.waitSignal(window.bridge.text_arrived, timeout=30_000):
        type_and_send(qtbot, window, "tell me a long story")
    qtbot.waitUntil(lambda: (chart.values or [0.0])[-1] > 0, timeout=10_000)  # decoding, measured
    with qtbot.waitSignal(window.bridge.finished, timeout=30_000) as finished:
        qtbot.keyClick(window, Qt.Key.Key_Escape)
    assert finished.args[0].reason == "cancelled"
    wait_until_idle(qtbot, window)
    qtbot.waitUntil(lambda: chart.values[-1] == 0.0, timeout=int(WINDOW_S * 1000) + 2000)
    assert chart.value_text() == "0.0 tok/s"
    assert window.loader.engine.stats().decode_tok_s == 0.0
