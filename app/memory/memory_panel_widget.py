"""The live memory-split panel: budget slider, the budget as a bar with a legend, the plan in words, the host
tier (pinned and memory-mapped experts, the page cache's read rate), expert hit rate / decode tok/s / H2D GB/s over the last seconds as live charts, the MV-WSA curve, and the controller's
decisions. It polls a stats source (engine.stats(), cheap) four times a second on the GUI thread; another engine
(a model switch) starts the charts afresh, and what does not apply to it (the pager's charts for llama.cpp or a
remote server) is hidden."""

from __future__ import annotations

import time
from typing import Callable

from PySide6.QtCore import QTimer, Signal, Slot
from PySide6.QtGui import QTextDocumentFragment
from PySide6.QtWidgets import QFrame, QGridLayout, QLabel, QVBoxLayout, QWidget

from app.memory.budget_slider_widget import BudgetSliderWidget
from app.memory.drafts_text import drafts_text
from app.memory.host_tier_text import host_tier_text
from app.memory.memory_bar_widget import MemoryBarWidget
from app.memory.memory_segments import SEGMENT_LABELS, expert_share, memory_segments
from app.memory.plan_log_widget import PlanLogWidget
from app.memory.plan_text import (BUDGET_REASON, controller_status, describe_plan_event, has_pager, is_remote,
                                  plan_summary)
from app.memory.recent_rates import RecentRates
from app.memory.sparkline_widget import SparklineWidget
from app.memory.throughput_curve_widget import ThroughputCurveWidget
from app.memory.wsa_curve import CurveProvider, engine_curve

POLL_INTERVAL_MS = 250
CURVE_EVERY_N_POLLS = 8
REMOTE_TEXT = "Memory is managed by the remote server: nothing of this model is on this computer's devices."


class MemoryPanelWidget(QFrame):
    budget_requested = Signal(object)  # bytes

    def __init__(self, theme, format_bytes, parse_size=None, parent: QWidget | None = None,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(parent)
        self._clock = clock
        self.setObjectName("sidePanel")
        self._format_bytes = format_bytes
        self._engine_source: Callable[[], object] = lambda: None
        self._curve_provider: CurveProvider = engine_curve
        self._num_polls = 0
        self._polled_engine = None
        self._last_decision: str | None = None  # the online controller's latest re-split, said under its status
        self._rates = RecentRates()
        self.budget_slider = BudgetSliderWidget(format_bytes, parse_size, self)
        self.bar = MemoryBarWidget(self)
        # Word-wrapped, so that growing numbers wrap inside the panel instead of widening it past the window.
        self.legend_labels = {key: QLabel(self, objectName="legendLabel", wordWrap=True) for key in SEGMENT_LABELS}
        self.plan_label = QLabel("No model loaded", self, wordWrap=True)
        self.plan_label.setAccessibleName("Memory plan")
        self.host_title = QLabel("Host memory", self, objectName="panelTitle")
        self.host_label = QLabel("", self, wordWrap=True)
        self.host_label.setAccessibleName("Host memory")
        self.hit_rate_chart = SparklineWidget("Expert hit rate", lambda v: f"{v:.1%}", self, fixed_maximum=1.0)
        self.decode_chart = SparklineWidget("Decode", lambda v: f"{v:.1f} tok/s", self)
        self.h2d_chart = SparklineWidget("Host → device", lambda v: f"{v:.2f} GB/s", self)
        self.drafts_label = QLabel("", self, objectName="mutedLabel", wordWrap=True)
        self.drafts_label.setAccessibleName("Speculative decoding")
        self.drafts_label.setVisible(False)
        self.curve = ThroughputCurveWidget(self)
        self.curve_title = QLabel("MV-WSA: predicted tok/s vs expert share", self, objectName="panelTitle")
        self.controller_label = QLabel("", self, objectName="mutedLabel", wordWrap=True)
        self.controller_label.setAccessibleName("Controller status")
        self.plan_log = PlanLogWidget(format_bytes, self)
        self._build_layout()
        self.set_theme(theme)
        self.budget_slider.budget_requested.connect(self.budget_requested)
        self._timer = QTimer(self, interval=POLL_INTERVAL_MS)
        self._timer.timeout.connect(self._on_poll_timer_timeout)
        self._timer.start()

    def _build_layout(self) -> None:
        legend = QGridLayout()
        legend.setHorizontalSpacing(12)
        legend.setVerticalSpacing(0)
        for position, label in enumerate(self.legend_labels.values()):
            legend.addWidget(label, position // 2, position % 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 10, 12, 10)
        layout.setSpacing(6)
        layout.addWidget(QLabel("Device memory", self, objectName="panelTitle"))
        layout.addWidget(self.budget_slider)
        layout.addWidget(self.bar)
        layout.addLayout(legend)
        layout.addWidget(self.plan_label)
        layout.addWidget(self.host_title)
        layout.addWidget(self.host_label)
        layout.addWidget(QLabel("Live", self, objectName="panelTitle"))
        for chart in (self.hit_rate_chart, self.decode_chart, self.h2d_chart):
            layout.addWidget(chart)
        layout.addWidget(self.drafts_label)
        layout.addWidget(self.curve_title)
        layout.addWidget(self.curve)
        layout.addWidget(QLabel("Controller decisions", self, objectName="panelTitle"))
        layout.addWidget(self.controller_label)
        layout.addWidget(self.plan_log)
        layout.addStretch(1)

    def set_theme(self, theme) -> None:
        self._theme = theme
        self.bar.set_colors({key: theme.color(f"segment_{key}") for key in SEGMENT_LABELS}, theme.color("border"))
        for chart in (self.hit_rate_chart, self.decode_chart, self.h2d_chart):
            chart.set_colors(theme.color("chart_line"), theme.color("chart_fill"), theme.color("text"),
                             theme.color("muted"))
        self.curve.set_colors(theme.color("chart_line"), theme.color("text"), theme.color("muted"),
                              theme.color("danger"))
        self.plan_log.set_error_color(theme.color("danger"))
        self.refresh()

    def set_engine_source(self, source: Callable[[], object]) -> None:
        """`source()` returns the serving engine.api.Engine or None."""
        self._engine_source = source
        self.refresh()

    def set_curve_provider(self, provider: CurveProvider) -> None:
        self._curve_provider = provider
        self._refresh_curve(self._engine_source())

    def add_plan_event(self, event) -> None:
        self.plan_log.add_event(event)
        if event.error is None and event.reason != BUDGET_REASON:  # the online controller decided
            self._last_decision = describe_plan_event(event, self._format_bytes)
        self.refresh()

    @Slot()
    def _on_poll_timer_timeout(self) -> None:
        engine = self._engine_source()
        if engine is None:
            return
        if engine is not self._polled_engine:
            self._start_afresh(engine)
        stats = engine.stats()
        if has_pager(stats.plan):
            self._rates.add(self._clock(), stats)
            self.hit_rate_chart.add_value(self._rates.hit_rate)
            self.h2d_chart.add_value(self._rates.h2d_gb_per_s)
        self.decode_chart.add_value(stats.decode_tok_s)
        self._show_plan(stats.plan, stats)
        self._num_polls += 1
        if self._num_polls % CURVE_EVERY_N_POLLS == 0:
            self._refresh_curve(engine)

    def _start_afresh(self, engine) -> None:
        """Another engine serves: the charts and rates describe the previous model, so they start over."""
        self._polled_engine = engine
        self._last_decision = None
        self._rates.clear()
        for chart in (self.hit_rate_chart, self.decode_chart, self.h2d_chart):
            chart.clear()

    def refresh(self) -> None:
        """Show the serving engine's plan now (a model was loaded), without waiting for the next poll."""
        engine = self._engine_source()
        if engine is None:
            self._set_local_parts_visible(True)
            self.plan_label.setText("No model loaded")
            self.host_label.setText("")
            self.bar.set_segments([], "No model loaded")
            return
        stats = engine.stats()
        self._show_plan(stats.plan, stats)
        self._refresh_curve(engine)

    def _show_plan(self, plan, stats) -> None:
        self._set_local_parts_visible(not is_remote(plan), has_pager(plan))
        if is_remote(plan):
            self.bar.set_segments([], REMOTE_TEXT)
            self.plan_label.setText(REMOTE_TEXT)
            return
        segments = memory_segments(plan, stats)
        describe = ", ".join(f"{s.label} {self._format_bytes(s.num_bytes)}" for s in segments)
        self.bar.set_segments(segments, describe)
        for segment in segments:
            color = getattr(self._theme, f"segment_{segment.key}")
            self.legend_labels[segment.key].setText(
                f'<span style="color:{color}">■</span> {segment.label} '
                f'<span style="white-space:nowrap">{self._format_bytes(segment.num_bytes)}</span>')  # one line
        self.legend_labels["state"].setVisible(any(segment.key == "state" for segment in segments))
        budget = "no budget" if plan.budget_bytes is None else f"budget {self._format_bytes(plan.budget_bytes)}"
        self.plan_label.setText(f"{plan.mode} · {budget} · {plan_summary(plan, self._format_bytes)}")
        self.host_label.setText(host_tier_text(stats, self._format_bytes))
        self.drafts_label.setText(drafts_text(stats))
        self.drafts_label.setVisible(bool(self.drafts_label.text()))

    def legend_text(self, key: str) -> str:
        """A legend entry as the user reads it (its rich text without the markup)."""
        return QTextDocumentFragment.fromHtml(self.legend_labels[key].text()).toPlainText()

    def _set_local_parts_visible(self, is_local: bool, has_pager: bool = True) -> None:
        """The bar and its legend describe local device memory (a remote engine has none); the hit rate, transfer
        rate and MV-WSA curve describe Wisp's expert pager (llama.cpp and remote servers have none)."""
        for widget in (self.bar, *self.legend_labels.values()):
            widget.setVisible(is_local)
        for widget in (self.host_title, self.host_label):  # llama.cpp places its own tensors; remote: none here
            widget.setVisible(is_local and has_pager)
        for widget in (self.hit_rate_chart, self.h2d_chart, self.curve_title, self.curve, self.controller_label):
            widget.setVisible(has_pager)

    def _refresh_curve(self, engine) -> None:
        points = self._curve_provider(engine) if engine is not None else None
        plan = engine.stats().plan if engine is not None else None
        share = expert_share(plan) if points else None
        self.curve.set_curve(points, share)
        status = controller_status(plan, points, share) if plan is not None else ""
        last = f"\nLast re-split: {self._last_decision}" if self._last_decision else ""
        self.controller_label.setText(status + last)
