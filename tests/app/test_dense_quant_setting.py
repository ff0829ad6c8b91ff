"""Model → Q8_0 dense weights: a checkable choice saved in the settings; turning it on loads a checkpoint again with
its dense weights as Q8_0 blocks (the engine's warning that the outputs change comes with it); a GGUF file is never
asked to (it keeps its own types); the picker's fit plans with the choice."""

import json

from app.model_loader import LoadRequest
from app.picker.model_fit import fit_at_budget
from app.settings import AppSettings, SettingsStore
from engine.api import EngineOptions, budget_marks, scan_models
from tests.app.conftest import LOAD_TIMEOUT_MS


def test_the_q8_0_choice_is_saved_and_reloads_the_checkpoint_with_it(qtbot, start_app):
    window = start_app()
    action = window.window_actions.dense_q8_0
    model_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Model")
    assert action in model_menu.actions() and action.isCheckable() and not action.isChecked()
    assert window.loader.request.dense_quant is None
    first_engine = window.loader.engine
    action.trigger()
    assert window.settings.dense_quant == "q8_0" and action.isChecked()
    qtbot.waitUntil(lambda: window.loader.engine is not None and window.loader.engine is not first_engine,
                    timeout=LOAD_TIMEOUT_MS)
    assert window.loader.engine.options.dense_quant == "q8_0"
    assert any("--dense-quant" in warning for warning in window.loader.engine.info.warnings)
    assert window._settings_store.load().dense_quant == "q8_0"


def test_a_gguf_file_keeps_its_types_and_a_bad_saved_value_falls_back(tmp_path, tiny_model):
    assert LoadRequest(tiny_model, None, dense_quant="q8_0").options().dense_quant == "q8_0"
    assert LoadRequest("/m/x.gguf", None, dense_quant="q8_0").options().dense_quant is None
    (tmp_path / "settings.json").write_text(json.dumps({"dense_quant": "q4_0", "max_tokens": 64}))
    assert SettingsStore(tmp_path / "settings.json").load() == AppSettings(max_tokens=64)


def test_the_picker_fits_a_budget_that_only_q8_0_dense_weights_fit(tiny_model):
    entry = next(entry for entry in scan_models([tiny_model]) if entry.path == tiny_model)
    budget = budget_marks(EngineOptions(model=tiny_model, device="cpu", experts="paged", dense_quant="q8_0")).minimum
    assert fit_at_budget(entry, budget, "cpu").needs_larger_budget
    assert not fit_at_budget(entry, budget, "cpu", dense_quant="q8_0").needs_larger_budget
