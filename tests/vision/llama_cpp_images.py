"""llama.cpp's image embeddings for an mmproj file and its model (llama-cpp-python's mtmd bindings, on the CPU): what
llama.cpp hands its language model for one image."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

IMAGE_CHUNK = 1  # MTMD_INPUT_CHUNK_TYPE_IMAGE


def llama_cpp_image_embeddings(model: Path, mmproj: Path, rgb: np.ndarray) -> np.ndarray:
    """rgb uint8 [H, W, 3] -> [image tokens, the model's hidden size] fp32, as llama.cpp's mtmd encodes it."""
    import llama_cpp
    from llama_cpp import mtmd_cpp as mtmd

    llama_cpp.llama_backend_init()
    text_model = llama_cpp.llama_model_load_from_file(str(model).encode(), llama_cpp.llama_model_default_params())
    params = mtmd.mtmd_context_params_default()
    params.use_gpu, params.warmup, params.n_threads = False, False, 2
    context = mtmd.mtmd_init_from_file(str(mmproj).encode(), text_model, params)
    assert context, f"llama.cpp could not load {mmproj}"
    height, width, _ = rgb.shape
    bitmap = mtmd.mtmd_bitmap_init(width, height, (ctypes.c_uint8 * rgb.size).from_buffer_copy(rgb.tobytes()))
    chunks = mtmd.mtmd_input_chunks_init()
    try:
        return encoded_image(mtmd, context, chunks, bitmap, llama_cpp.llama_model_n_embd(text_model))
    finally:
        mtmd.mtmd_input_chunks_free(chunks)
        mtmd.mtmd_bitmap_free(bitmap)
        mtmd.mtmd_free(context)
        llama_cpp.llama_model_free(text_model)


def encoded_image(mtmd, context, chunks, bitmap, hidden: int) -> np.ndarray:
    marker = mtmd.mtmd_default_marker()
    text = mtmd.mtmd_input_text(text=marker, text_len=len(marker), add_special=False, parse_special=True)
    assert mtmd.mtmd_tokenize(context, chunks, ctypes.byref(text), (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap), 1) == 0
    images = [chunk for chunk in (mtmd.mtmd_input_chunks_get(chunks, i) for i in range(
        mtmd.mtmd_input_chunks_size(chunks))) if mtmd.mtmd_input_chunk_get_type(chunk) == IMAGE_CHUNK]
    assert len(images) == 1 and mtmd.mtmd_encode_chunk(context, images[0]) == 0
    count = mtmd.mtmd_input_chunk_get_n_tokens(images[0])
    embeddings = np.ctypeslib.as_array(mtmd.mtmd_get_output_embd(context), shape=(count * hidden,))
    return embeddings.reshape(count, hidden).copy()
