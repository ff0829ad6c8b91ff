"""Broken model folders give a dialog and the app keeps working; the picker lists them with the reason."""

import shutil

from PySide6.QtCore import Qt

from tests.app.driving import error_dialogs, type_and_send, use_greedy_sampling, wait_for_error_dialog, wait_until_idle


def broken_config_folder(tmp_path):
    folder = tmp_path / "broken-config"
    folder.mkdir()
    (folder / "config.json").write_text("{ this is not json")
    return folder


def truncated_weights_folder(tmp_path, model):
    folder = tmp_path / "truncated-weights"
    shutil.copytree(model, folder)
    weights = next(folder.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return folder


def test_a_broken_folder_is_refused_and_the_current_model_keeps_serving(qtbot, start_app, tmp_path):
    window = start_app()
    engine = window.loader.engine
    window.load_model(str(broken_config_folder(tmp_path)))
    dialog = wait_for_error_dialog(qtbot, window)
    assert "config.json" in dialog.text()
    qtbot.waitUntil(lambda: window.loader.engine is engine)
    qtbot.wait(100)
    assert sum("serving" in entry for entry in window.memory_panel.plan_log.entries()) == 1
    dialog.accept()
    use_greedy_sampling(window, max_tokens=8)
    type_and_send(qtbot, window, "still there?")
    wait_until_idle(qtbot, window)
    assert window.conversation.messages[-1].info["reason"] in ("stop", "length")


def test_truncated_weights_fail_the_load_and_the_previous_model_comes_back(qtbot, start_app, tmp_path, tiny_model):
    window = start_app()
    use_greedy_sampling(window, max_tokens=8)
    type_and_send(qtbot, window, "before")
    wait_until_idle(qtbot, window)
    window.load_model(str(truncated_weights_folder(tmp_path, tiny_model)))
    dialog = wait_for_error_dialog(qtbot, window)
    assert "safetensors" in dialog.text()
    qtbot.waitUntil(lambda: window.loader.engine is not None, timeout=30_000)
    assert window.loader.request.model == tiny_model
    dialog.accept()
    type_and_send(qtbot, window, "after")
    wait_until_idle(qtbot, window)
    assert [m.content for m in window.conversation.messages if m.role == "user"] == ["before", "after"]


def test_the_picker_lists_models_with_their_fit_and_broken_ones_with_the_reason(qtbot, start_app, tmp_path,
                                                                                tiny_model):
    window = start_app()
    broken = broken_config_folder(tmp_path)
    picker = window.open_model_picker()
    picker.add_path(str(broken))
    with qtbot.waitSignal(picker.scanned, timeout=10_000):
        picker.add_path(tiny_model)
    rows = {row.entry.path: row for row in picker.model.rows}
    assert rows[str(broken)].entry.error and not rows[str(broken)].is_usable
    assert rows[tiny_model].fit == "fits: every expert resident" and rows[tiny_model].is_usable
    assert rows[tiny_model].is_loaded and picker.model.data(picker.model.index(
        list(rows).index(tiny_model), 0)).endswith("(loaded)")
    assert any(row.entry.source == "demo" for row in picker.model.rows)
    assert window.settings.model_folders == (str(broken), tiny_model)
    picker.select_row(list(rows).index(str(broken)))
    assert not picker.load_button.isEnabled()
    picker.select_row(list(rows).index(tiny_model))
    assert picker.load_button.isEnabled()
    with qtbot.waitSignal(window.loader.ready, timeout=30_000):
        qtbot.mouseClick(picker.load_button, Qt.MouseButton.LeftButton)
    assert not error_dialogs(window)


def test_the_picker_agrees_with_the_engine_it_would_load(qtbot, start_app, tiny_model):
    """At a budget where the loaded engine pages experts, the picker says so, with the engine's slot count."""
    from engine.api import EngineOptions, budget_marks

    marks = budget_marks(EngineOptions(model=tiny_model, device="cpu", experts="paged"))
    window = start_app(budget_bytes=marks.minimum + (marks.all_resident - marks.minimum) // 2)
    plan, num_experts = window.loader.engine.stats().plan, window.loader.engine.info.num_experts
    assert plan.min_layer_slots < num_experts
    picker = window.open_model_picker()
    with qtbot.waitSignal(picker.scanned, timeout=10_000):
        picker.add_path(tiny_model)
    row = next(row for row in picker.model.rows if row.entry.path == tiny_model)
    assert row.fit == f"pages experts ({plan.min_layer_slots} of {num_experts} slots per layer)"


def test_truncated_weights_are_listed_as_broken_while_scanning(qtbot, start_app, tmp_path, tiny_model):
    window = start_app()
    truncated = truncated_weights_folder(tmp_path, tiny_model)
    picker = window.open_model_picker()
    with qtbot.waitSignal(picker.scanned, timeout=10_000):
        picker.add_path(str(truncated))
    row = next(row for row in picker.model.rows if row.entry.path == str(truncated))
    assert not row.is_usable and "truncated" in row.fit


def test_a_budget_too_small_for_every_model_is_not_broken_and_offers_the_minimum(qtbot, start_app, tiny_model):
    window = start_app(budget_bytes=100 * 1024**2, is_ready_awaited=False)
    slider = window.memory_panel.budget_slider
    qtbot.waitUntil(lambda: slider.offer_button.isVisible(), timeout=30_000)
    assert "Not loaded" in slider.state_label.text() and not error_dialogs(window)
    picker = window.open_model_picker()
    with qtbot.waitSignal(picker.scanned, timeout=10_000):
        picker.add_path(tiny_model)
    row = next(row for row in picker.model.rows if row.entry.path == tiny_model)
    assert row.fit.startswith("needs a larger budget") and row.is_usable and row.minimum_bytes
    picker.reject()
    with qtbot.waitSignal(window.loader.ready, timeout=30_000):
        qtbot.mouseClick(slider.offer_button, Qt.MouseButton.LeftButton)
    assert window.loader.engine.stats().plan.budget_bytes == slider.budget_bytes == row.minimum_bytes


def test_the_picker_names_shared_experts_beside_the_routed_ones(tmp_path):
    """GLM-4.5-Air's published config: 128 routed experts, top-8, one shared expert (resident, dense)."""
    import json

    import torch
    from safetensors.torch import save_file

    from app.picker.model_list_model import experts_text
    from engine.api import scan_models
    from engine.model.published_configs import GLM_45_AIR

    folder = tmp_path / "GLM-4.5-Air"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(GLM_45_AIR))
    (folder / "tokenizer.json").write_text("{}")
    save_file({"lm_head.weight": torch.zeros(1)}, folder / "model.safetensors")
    entry = scan_models([str(folder)], cache=tmp_path / "no-cache")[-1]
    assert entry.is_usable and entry.num_shared_experts == 1
    assert experts_text(entry) == "128 × top-8 + 1 shared, 46 layers"
