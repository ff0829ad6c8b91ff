"""The budget slider re-plans the live engine at a drained barrier; the panel shows the plan and the decisions."""

from PySide6.QtCore import Qt

from app.memory.budget_controller import PENDING_TEXT
from app.memory.memory_segments import expert_share, memory_segments
from tests.app.conftest import GiB
from tests.app.driving import error_dialogs, type_and_send, use_greedy_sampling, wait_until_idle

MiB = 1024**2


def test_moving_the_slider_replans_at_the_next_drained_barrier(qtbot, start_app):
    window = start_app()
    slider, old_plan = window.memory_panel.budget_slider, window.loader.engine.stats().plan
    assert slider.budget_bytes == GiB and "budget 1.0 GiB" in window.memory_panel.plan_label.text()
    use_greedy_sampling(window, max_tokens=400, system_prompt="")
    with qtbot.waitSignal(window.bridge.text_arrived, timeout=30_000):
        type_and_send(qtbot, window, "hi")
    finished = []
    window.bridge.finished.connect(finished.append)
    slider.request(GiB - 256 * MiB)
    assert slider.state_label.text() == PENDING_TEXT and window.budget.is_pending
    with qtbot.waitSignal(window.bridge.plan_changed, timeout=30_000) as changed:
        qtbot.keyClick(window, Qt.Key.Key_Escape)  # stopping drains the engine: the barrier where it re-plans
    assert finished, "the plan changed while a request was still running"
    event = changed.args[0]
    assert event.error is None and event.new.kv_blocks < old_plan.kv_blocks
    assert window.loader.engine.stats().plan == event.new
    assert slider.state_label.text() == "" and slider.budget_bytes == GiB - 256 * MiB
    assert "budget 1.0 GiB → 768.0 MiB" in window.memory_panel.plan_log.entries()[0]
    qtbot.waitUntil(lambda: "budget 768.0 MiB" in window.memory_panel.plan_label.text())
    assert window.settings.budget_bytes == GiB - 256 * MiB
    wait_until_idle(qtbot, window)


def test_a_budget_below_the_minimum_is_refused_inline_with_the_number(qtbot, start_app):
    window = start_app()
    slider, before = window.memory_panel.budget_slider, window.loader.engine.stats().plan
    with qtbot.waitSignal(window.bridge.plan_changed, timeout=10_000):
        slider.request(256 * MiB)
    assert "minimum is" in slider.state_label.text() and slider.state_label.text().startswith("Refused")
    assert slider.budget_bytes == GiB and slider.size_edit.text() == "1.0 GiB"
    assert window.loader.engine.stats().plan == before
    assert "refused" in window.memory_panel.plan_log.entries()[0]
    qtbot.wait(200)
    assert not error_dialogs(window), "a refusal is said next to the slider, not in a modal dialog"


def test_the_panel_polls_live_counters(qtbot, start_app):
    window = start_app()
    panel = window.memory_panel
    use_greedy_sampling(window, max_tokens=30)
    qtbot.waitUntil(lambda: bool(panel.hit_rate_chart.values))  # a poll before the reply: a rate needs two
    type_and_send(qtbot, window, "count")
    wait_until_idle(qtbot, window)
    qtbot.waitUntil(lambda: any(panel.hit_rate_chart.values), timeout=5000)  # idle samples are None
    assert {segment.key for segment in panel.bar.segments} >= {"dense", "experts", "kv_free", "workspace"}
    assert "Expert slots, filled" in panel.legend_text("experts")
    assert not panel.curve.is_available  # no MV-WSA model in the engine yet: said, not faked


def test_a_curve_provider_draws_the_curve_with_the_current_point(qtbot, start_app):
    window = start_app()
    points = [(0.0, 1.0), (0.5, 8.0), (1.0, 10.0)]
    window.memory_panel.set_curve_provider(lambda engine: points)
    assert window.memory_panel.curve.is_available
    window.memory_panel.curve.grab()  # paints without error


class _Plan:
    mode, budget_bytes, dense_bytes, expert_bytes, layer_slots, num_moe_layers = "paged", 1000, 100, 10, (4, 4), 2
    kv_block_bytes, kv_blocks, workspace_bytes = 20, 10, 50
    expert_device_bytes, kv_bytes, total_bytes, free_bytes = 80, 200, 430, 570


class _Stats:
    expert_misses, kv_blocks_used = 3, 4


def test_memory_segments_add_up_to_the_budget():
    segments = {s.key: s.num_bytes for s in memory_segments(_Plan(), _Stats())}
    assert segments == {"dense": 100, "experts": 30, "experts_free": 50, "kv": 80, "kv_free": 120,
                        "workspace": 50, "free": 570}
    assert sum(segments.values()) == _Plan.budget_bytes
    assert expert_share(_Plan()) == 80 / 280


def test_a_re_split_says_how_long_it_paused_the_engine():
    from dataclasses import replace

    from engine.api import MemoryPlan, PlanEvent
    from app.memory.plan_text import describe_plan_event

    old = MemoryPlan(mode="paged", budget_bytes=GiB, dense_bytes=256 * MiB, expert_bytes=MiB, layer_slots=(8, 8),
                     num_moe_layers=2, offloaded_layers=0, static_resident_bytes=0, kv_blocks=100,
                     kv_block_bytes=MiB, workspace_bytes=0)
    new = replace(old, kv_blocks=60, layer_slots=(28, 28))
    text = describe_plan_event(PlanEvent(0.0, old, new, "recent routing and KV use", stall_s=0.42), lambda b: f"{b}B")
    assert "KV" in text and "expert slots 16 → 56" in text and text.endswith("(paused 0.42 s)")
    quick = describe_plan_event(PlanEvent(0.0, old, new, "budget changed", stall_s=0.001), lambda b: f"{b}B")
    assert "paused" not in quick


def test_the_side_panel_fits_its_column_when_the_numbers_grow(qtbot, start_app):
    window = start_app()
    panel = window.memory_panel
    scroll_area = panel.parentWidget().parentWidget().parentWidget()
    for label in panel.legend_labels.values():
        label.setText('<span>■</span> Expert slots, filled 1234567.9 GiB and then some more')
    qtbot.wait(50)
    for label in panel.legend_labels.values():
        right = label.mapTo(scroll_area, label.rect().topRight()).x()
        assert right <= scroll_area.viewport().width(), "a legend entry runs past the panel's right edge"
