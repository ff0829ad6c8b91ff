"""The memory panel shows the host tier: pinned host memory and memory-mapped experts, and the page cache's reads
once misses go to the model file. The cap comes from the settings (host_budget_bytes) and reaches the engine."""

import json

from app.engine_api import format_bytes
from app.memory.host_tier_text import NO_HOST_TIER, host_tier_text
from tests.app.driving import type_and_send, use_greedy_sampling, wait_until_idle
from tests.app.test_memory_panel_truth import Stats, StandInEngine, panel, plan, poll  # noqa: F401  (fixture)

KiB = 1024


def test_a_capped_model_shows_both_tiers_and_its_page_cache_reads(qtbot, start_app, data_dir):
    data_dir.mkdir(parents=True)
    (data_dir / "settings.json").write_text(json.dumps({"host_budget_bytes": 200 * KiB}))
    window = start_app()
    panel = window.memory_panel
    assert window.loader.request.host_budget_bytes == 200 * KiB
    stats = window.loader.engine.stats()
    assert stats.host_mapped_bytes > 0 and 0 < stats.host_pinned_bytes <= 200 * KiB
    qtbot.waitUntil(lambda: "memory-mapped" in panel.host_label.text())
    assert panel.host_label.isVisible() and panel.host_title.isVisible()
    assert f"Pinned {format_bytes(stats.host_pinned_bytes)}" in panel.host_label.text()
    assert f"memory-mapped {format_bytes(stats.host_mapped_bytes)}" in panel.host_label.text()
    use_greedy_sampling(window, max_tokens=8)
    type_and_send(qtbot, window, "count")
    wait_until_idle(qtbot, window)
    qtbot.waitUntil(lambda: "GB/s" in panel.host_label.text(), timeout=5000)
    assert window.loader.engine.stats().page_cache_reads > 0
    assert "Page cache:" in panel.host_label.text() and "reads" in panel.host_label.text()


def test_every_expert_pinned_and_experts_on_the_device_are_said(panel):  # noqa: F811
    engine = StandInEngine(Stats(plan(), host_pinned_bytes=3 * 1024**3))
    panel.set_engine_source(lambda: engine)
    poll(panel, engine)
    assert "memory-mapped 0.0 GiB" in panel.host_label.text() and "never read the model file" in panel.host_label.text()
    engine.current = Stats(plan())
    poll(panel, engine)
    assert panel.host_label.text() == NO_HOST_TIER


def test_llama_cpp_shows_no_host_tier(panel):  # noqa: F811
    engine = StandInEngine(Stats(plan("llama.cpp"), host_pinned_bytes=1))
    panel.set_engine_source(lambda: engine)
    poll(panel, engine)
    assert not panel.host_label.isVisible() and not panel.host_title.isVisible()


def test_the_page_cache_line_waits_for_reads():
    stats = Stats(plan(), host_pinned_bytes=2048, host_mapped_bytes=4096)
    assert host_tier_text(stats, str).endswith("Page cache: no reads yet.")
    stats.page_cache_reads, stats.page_cache_bytes, stats.page_cache_gb_per_s = 3, 3000, 1.5
    assert host_tier_text(stats, str) == "Pinned 2048 · memory-mapped 4096\nPage cache: 3 reads, 3000 at 1.50 GB/s"
