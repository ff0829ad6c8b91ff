"""What the memory plan counts for an mmproj file's tower, whichever projector: its weights and one largest image's
activations, in elements, from the file's header. Torch-free."""

from __future__ import annotations

from engine.gguf.mmproj_file import GEMMA4_PROJECTOR, MmprojFile
from engine.gguf.mmproj_gemma4 import gemma4_mmproj_elements


def mmproj_tower_elements(mmproj: MmprojFile) -> int:
    if mmproj.projector == GEMMA4_PROJECTOR:
        return gemma4_mmproj_elements(mmproj)
    tower = mmproj.vision_args(image_token_id=0, vision_start_token_id=0)
    return tower.num_params + tower.workspace_elements(mmproj.processing.max_pixels)
