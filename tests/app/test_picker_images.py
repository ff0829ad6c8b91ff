"""The model picker pairs a GGUF file with the mmproj vision tower beside it: one row (the tower file is not listed
as a model), marked as seeing images, the tower named in its tooltip; a vision-language checkpoint folder is marked
too, a text model is not."""

from PySide6.QtCore import Qt

from app.picker.model_list_model import IMAGES_MARK, ModelListModel
from app.picker.model_picker_dialog import scan_rows
from engine.cli import main
from tests.app.conftest import GiB
from tests.vision.tiny_vl import write_tiny_vl

ARCHITECTURE = 2  # the table's column


def test_the_picker_shows_a_gguf_file_with_its_tower_as_seeing_images(qtbot, tmp_path, tiny_model):
    checkpoint = write_tiny_vl(tmp_path / "vl")
    folder = tmp_path / "downloads"
    folder.mkdir()
    model, mmproj = folder / "tiny-vl.gguf", folder / "mmproj-tiny-vl-f32.gguf"
    assert main(["convert-gguf", str(checkpoint), str(model), "--type", "f32", "--mmproj", str(mmproj)]) == 0
    rows = [row for row in scan_rows((str(folder), str(checkpoint), tiny_model), 4 * GiB, device="cpu")
            if row.entry.source != "demo"]
    table = ModelListModel(lambda n: f"{n} B")
    table.set_rows(rows)
    cells = {row.entry.path: table.data(table.index(index, ARCHITECTURE)) for index, row in enumerate(rows)}
    assert list(cells) == [str(model), str(checkpoint), tiny_model]
    assert cells[str(model)] == "qwen35moe" + IMAGES_MARK and cells[str(checkpoint)] == "qwen3_5_moe" + IMAGES_MARK
    assert cells[tiny_model] == "qwen3_moe"
    tooltip = table.data(table.index(0, ARCHITECTURE), Qt.ItemDataRole.ToolTipRole)
    assert f"vision tower: {mmproj}" in tooltip
