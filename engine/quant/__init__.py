"""Quantized weights in GGUF block formats: the types, a torch reference dequantization (bit-exact against the
`gguf` package), Triton kernels that dequantize and multiply in one pass, and the slot format of a quantized
expert that the expert providers page."""
