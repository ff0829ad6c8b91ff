"""The MV-WSA chart after a budget change: the curve is over the new pool's shares, with the current split on it;
at the minimum budget (room for one split) it says so instead of drawing a lone dot."""

from PySide6.QtCore import Qt

from app.memory.memory_segments import expert_share
from engine.api import EngineOptions, budget_marks
from tests.app.driving import type_and_send, use_greedy_sampling, wait_until_idle

MiB = 1024**2


def type_budget(qtbot, window, num_bytes: int) -> None:
    slider = window.memory_panel.budget_slider
    slider.size_edit.setText(f"{num_bytes / MiB:.1f} MiB")
    with qtbot.waitSignal(window.bridge.plan_changed, timeout=10_000):
        qtbot.keyClick(slider.size_edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not window.budget.is_pending, timeout=10_000)


def reply(qtbot, window, text: str) -> None:
    type_and_send(qtbot, window, text)
    wait_until_idle(qtbot, window)


def curve_covers_the_split(window) -> bool:
    """The current split is on the curve, and the curve is of this plan's pool: each of its points is a whole
    number of expert slots in it (a curve left from another budget's pool is not)."""
    curve = window.memory_panel.curve
    plan = window.loader.engine.stats().plan
    share = expert_share(plan)
    if curve._points is None or curve._current is None or abs(curve._current - share) > 1e-12:
        return False
    xs = [x for x, _ in curve._points]
    slots = [x * (plan.expert_device_bytes + plan.kv_bytes) / plan.expert_bytes for x in xs]
    return min(xs) <= share <= max(xs) and all(abs(n - round(n)) < 1e-6 for n in slots)


def test_the_curve_follows_a_budget_change_and_says_when_one_split_fits(qtbot, start_app, tiny_model):
    marks = budget_marks(EngineOptions(model=tiny_model, device="cpu", experts="paged"))
    window = start_app()
    use_greedy_sampling(window, max_tokens=24)
    reply(qtbot, window, "first")
    window.memory_panel.refresh()
    assert curve_covers_the_split(window)

    type_budget(qtbot, window, marks.minimum + (marks.all_resident - marks.minimum) // 3)
    assert curve_covers_the_split(window)  # drawn over the new pool, not the old one
    reply(qtbot, window, "second")
    window.memory_panel.refresh()
    assert curve_covers_the_split(window)

    type_budget(qtbot, window, marks.minimum)
    reply(qtbot, window, "third")
    window.memory_panel.refresh()
    curve = window.memory_panel.curve
    assert curve_covers_the_split(window)
    assert len(curve._points) == 1 and curve.caption.startswith("Only one split fits this budget")
    assert curve.accessibleDescription() == curve.caption
