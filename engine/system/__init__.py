"""The machine: hardware detection and Triton's support and rounding on it."""
