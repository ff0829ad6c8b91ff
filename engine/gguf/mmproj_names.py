"""The tensor names of an mmproj file (llama.cpp's `clip` architecture, projector `qwen3vl_merger`) for each
parameter of Wisp's vision tower (engine.vision.tower), as llama.cpp's converter names them: the blocks through the
gguf package's tensor map (visual.blocks.N.attn.qkv -> v.blk.N.attn_qkv), the merger as mm.0 / mm.2 with its norm
v.post_ln, the deepstack mergers v.deepstack.<tower block>.*, and the Conv3d patch embedding cut along its temporal
axis into two Conv2d weights (v.patch_embd.weight and v.patch_embd.weight.1; one bias)."""

from __future__ import annotations

from engine.vision.vision_args import VisionArgs

PATCH_WEIGHT = "patch_embed.proj.weight"  # [hidden, C, temporal, P, P]: one mmproj tensor per temporal slice
MERGER = {"norm": "v.post_ln", "linear_fc1": "mm.0", "linear_fc2": "mm.2"}
DEEPSTACK = {"norm": "norm", "linear_fc1": "fc1", "linear_fc2": "fc2"}


def patch_weight_names(args: VisionArgs) -> list[str]:
    """The Conv2d weights the patch embedding's temporal slices are stored as, in temporal order."""
    return ["v.patch_embd.weight", *(f"v.patch_embd.weight.{t}" for t in range(1, args.temporal_patch_size))]


def mmproj_tensor_name(param: str, args: VisionArgs) -> str:
    """The mmproj tensor of a tower parameter other than PATCH_WEIGHT (a 'module.weight' or 'module.bias')."""
    module, suffix = param.rsplit(".", 1)
    head, _, rest = module.partition(".")
    if head == "merger":
        return f"{MERGER[rest]}.{suffix}"
    if head == "deepstack_merger_list":
        index, part = rest.split(".", 1)
        return f"v.deepstack.{args.deepstack_visual_indexes[int(index)]}.{DEEPSTACK[part]}.{suffix}"
    if module == "patch_embed.proj":
        return f"v.patch_embd.{suffix}"
    return f"{block_tensor_map(args.depth).get_name('visual.' + module)}.{suffix}"


def block_tensor_map(depth: int):
    import gguf

    return gguf.get_tensor_name_map(gguf.MODEL_ARCH.MMPROJ, depth)
