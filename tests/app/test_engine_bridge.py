"""Engine-thread events reach the GUI thread batched, in order, through queued signals."""

import threading

from PySide6.QtCore import QThread

from app.engine_bridge import EngineBridge
from engine.api import FinishEvent, RequestStats, TokenEvent

NUM_TOKENS = 400


def test_tokens_are_batched_in_order_and_delivered_on_the_gui_thread(qtbot):
    bridge = EngineBridge()
    texts, threads = [], set()
    bridge.text_arrived.connect(lambda request_id, text: (texts.append(text), threads.add(QThread.currentThread())))
    stats = RequestStats(1, 0, NUM_TOKENS, 0.0, 0.0, 0.0, 0)
    expected = "".join(f"t{i} " for i in range(NUM_TOKENS))

    def engine_thread():
        for i in range(NUM_TOKENS):
            bridge.on_event(TokenEvent("r", i, f"t{i} ", 0.0))
        bridge.on_event(FinishEvent("r", "length", expected, (), (), stats))

    with qtbot.waitSignal(bridge.finished, timeout=10_000) as finished:
        threading.Thread(target=engine_thread).start()
    assert "".join(texts) == expected == finished.args[0].text
    assert len(texts) < NUM_TOKENS / 4  # batched, not one signal per token
    assert threads == {QThread.currentThread()}
