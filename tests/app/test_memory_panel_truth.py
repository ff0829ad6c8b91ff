"""The memory panel tells what the engine does now: rates over the last seconds, a fresh start for another
model, nothing about a pager that is not there, and a curve drawn over the range the controller can choose from.
Driven with a stand-in engine (stats only), so every poll is under the test's control."""

from dataclasses import dataclass, replace

import pytest
from PySide6.QtGui import QColor

from app.memory.budget_controller import BudgetController
from app.memory.budget_range import BudgetRange
from app.memory.budget_slider_widget import NOT_APPLICABLE_TEXT
from app.memory.memory_panel_widget import MemoryPanelWidget
from app.theme import resolve_theme

GiB, MiB = 1024**3, 1024**2


def plan(mode="paged"):
    from engine.api import MemoryPlan

    return MemoryPlan(mode=mode, budget_bytes=GiB if mode == "paged" else None, dense_bytes=256 * MiB,
                      expert_bytes=MiB, layer_slots=(8, 8), num_moe_layers=2, offloaded_layers=0,
                      static_resident_bytes=0, kv_blocks=100, kv_block_bytes=MiB, workspace_bytes=0)


@dataclass
class Stats:
    plan: object
    expert_hits: int = 0
    expert_misses: int = 0
    expert_hit_rate: float = 1.0  # the engine's figure since load: the panel must not show it
    h2d_bytes: int = 0
    h2d_gb_per_s: float = 2.54
    decode_tok_s: float = 0.0
    kv_blocks_used: int = 0
    kv_blocks_total: int = 100
    running: int = 0
    waiting: int = 0
    pending_budget: int | None = None
    device_peak_bytes: int | None = None
    wsa_curve: tuple | None = None
    host_pinned_bytes: int = 0
    host_mapped_bytes: int = 0
    page_cache_reads: int = 0
    page_cache_bytes: int = 0
    page_cache_gb_per_s: float = 0.0


class StandInEngine:
    def __init__(self, stats: Stats):
        self.current = stats

    def stats(self) -> Stats:
        return self.current


@pytest.fixture
def panel(qtbot):
    clock = {"now": 0.0}
    widget = MemoryPanelWidget(resolve_theme("light"), lambda b: f"{b / GiB:.1f} GiB",
                               clock=lambda: clock["now"])
    widget._timer.stop()  # the test polls
    widget.clock = clock
    qtbot.addWidget(widget)
    widget.resize(380, 900)
    widget.show()
    return widget


def poll(panel, engine, seconds=0.25):
    panel.clock["now"] += seconds
    panel._on_poll_timer_timeout()


def test_rates_are_over_the_last_seconds_not_since_load(panel):
    engine = StandInEngine(Stats(plan()))
    panel.set_engine_source(lambda: engine)
    poll(panel, engine)
    assert panel.hit_rate_chart.value_text() == "–", "no expert was looked up yet: no hit rate, not 100%"
    for _ in range(8):  # decoding: 90 of every 100 lookups hit, 0.5 GB moved each quarter second
        engine.current = replace(engine.current, expert_hits=engine.current.expert_hits + 90,
                                 expert_misses=engine.current.expert_misses + 10,
                                 h2d_bytes=engine.current.h2d_bytes + 500_000_000)
        poll(panel, engine)
    assert panel.hit_rate_chart.values[-1] == pytest.approx(0.9)
    assert panel.h2d_chart.values[-1] == pytest.approx(2.0)
    for _ in range(16):  # idle for four seconds: the totals stop moving
        poll(panel, engine)
    assert panel.h2d_chart.values[-1] == 0.0 and panel.h2d_chart.value_text() == "0.00 GB/s"
    assert panel.hit_rate_chart.value_text() == "–"


def test_another_model_starts_the_charts_afresh(panel):
    first = StandInEngine(Stats(plan(), expert_hits=100, expert_misses=100, decode_tok_s=50.0))
    panel.set_engine_source(lambda: first)
    for _ in range(5):
        poll(panel, first)
    second = StandInEngine(Stats(plan(), decode_tok_s=7.0))
    panel.set_engine_source(lambda: second)
    poll(panel, second)
    assert panel.decode_chart.values == [7.0] and panel.h2d_chart.values == [0.0]


@pytest.mark.parametrize("mode", ["llama.cpp", "remote"])
def test_a_model_without_wisps_pager_shows_no_pager_charts_and_no_working_slider(panel, mode):
    engine = StandInEngine(Stats(plan(mode)))
    panel.set_engine_source(lambda: engine)
    poll(panel, engine)
    for widget in (panel.hit_rate_chart, panel.h2d_chart, panel.curve):
        assert not widget.isVisible()
    assert panel.decode_chart.isVisible()
    slider = panel.budget_slider
    slider.set_range(BudgetRange(256 * MiB, 24 * GiB, 8 * GiB, "a GPU"))
    BudgetController(slider, lambda: engine).show_plan(engine.current.plan)
    assert not slider.slider.isEnabled() and not slider.size_edit.isEnabled()
    if mode == "llama.cpp":
        assert slider.state_label.text() == NOT_APPLICABLE_TEXT


def test_the_curve_spans_the_chart_over_the_feasible_range(panel):
    from app.memory.memory_segments import expert_share

    low = expert_share(plan()) - 0.05  # the feasible range holds the current split
    curve = tuple((low + 0.02 * i, 40.0 + 3 * i - 0.2 * i * i) for i in range(11))
    engine = StandInEngine(Stats(plan(), wsa_curve=curve))
    panel.set_engine_source(lambda: engine)
    image = panel.curve.grab().toImage()
    line = QColor(resolve_theme("light").color("chart_line"))
    columns = {x for x in range(image.width()) for y in range(image.height())
               if QColor(image.pixel(x, y)).rgb() == line.rgb()}
    assert len(columns) > image.width() * 0.6, "the curve is squeezed into a corner"
    assert "Watching" in panel.controller_label.text() or "Keeping" in panel.controller_label.text()


def test_a_controller_decision_is_said_under_its_status_and_a_budget_change_is_not(panel):
    from engine.api import PlanEvent

    engine = StandInEngine(Stats(plan(), wsa_curve=((0.1, 50.0), (0.2, 60.0))))
    panel.set_engine_source(lambda: engine)
    old = plan()
    panel.add_plan_event(PlanEvent(0.0, old, replace(old, budget_bytes=2 * GiB), "budget changed"))
    assert "Last re-split" not in panel.controller_label.text()
    new = replace(old, kv_blocks=60, layer_slots=(10, 14))
    panel.add_plan_event(PlanEvent(0.0, old, new, "recent routing and KV use: KV 0.10 -> 0.06 GiB", stall_s=0.3))
    text = panel.controller_label.text()
    assert "Last re-split" in text and "recent routing and KV use" in text and "paused 0.30 s" in text
    assert "recent routing" in panel.plan_log.entries()[0]
    poll(panel, engine)
    assert "Last re-split" in panel.controller_label.text()  # kept while the status refreshes


@pytest.mark.parametrize("model, budget_gib", [("Qwen1.5-MoE-A2.7B", 12), ("GLM-4.5-Air", 48)])
def test_shared_experts_are_shown_inside_the_dense_weights(panel, tmp_path, model, budget_gib):
    """A model with shared experts (its published config, planned as the picker plans it): they are dense
    weights, the legend's dense segment holds them and the plan says so; a model without them says nothing."""
    from engine.api import EngineOptions, engine_plan
    from engine.model.published_configs import GLM_45_AIR
    from tests.model.test_fit_estimates import QWEN15_MOE_A27B, config_folder

    config = {"Qwen1.5-MoE-A2.7B": QWEN15_MOE_A27B, "GLM-4.5-Air": GLM_45_AIR}[model]
    shared_plan = engine_plan(EngineOptions(model=config_folder(tmp_path, config), budget_bytes=budget_gib * GiB,
                                            experts="paged", device="cpu", dtype="bfloat16", max_num_seqs=1))
    engine = StandInEngine(Stats(shared_plan))
    panel.set_engine_source(lambda: engine)
    poll(panel, engine)
    shared = f"shared experts {shared_plan.shared_expert_bytes / GiB:.1f} GiB, resident with the dense weights"
    assert shared in panel.plan_label.text()
    assert f"Dense weights {shared_plan.dense_bytes / GiB:.1f} GiB" in panel.legend_text("dense")
    engine.current = Stats(plan())
    poll(panel, engine)
    assert "shared experts" not in panel.plan_label.text()
