"""A memory-mapped GGUF file: metadata, tensor infos, and zero-copy views of tensor bytes.

gguf.GGUFReader builds numpy views per vocabulary string and per tensor, seconds for a 152k-token vocabulary:
too slow to open a model with. This walks the format (gguf's
docs/gguf.md) with struct over one read-only np.memmap: scalars and small arrays are decoded at once,
large arrays (tokens, merges, scores) are kept as `LazyArray` and decoded only when asked for.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import ModelFormatError, WispError

MAGIC = b"GGUF"
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
NUMPY = {0: np.uint8, 1: np.int8, 2: np.uint16, 3: np.int16, 4: np.uint32, 5: np.int32, 6: np.float32, 7: np.bool_,
         10: np.uint64, 11: np.int64, 12: np.float64}
STRING, ARRAY = 8, 9
EAGER_ARRAY = 1024  # longer arrays stay LazyArray until asked for
MAX_ARRAY_NESTING = 8  # llama.cpp writes arrays of scalars or strings; deeper nesting is only a broken file
DEFAULT_ALIGNMENT = 32


@dataclass(frozen=True)
class LazyArray:
    """A metadata array not decoded yet: its element kind, length and offset in the file."""

    kind: int
    count: int
    offset: int


@dataclass(frozen=True)
class TensorInfo:
    """One tensor: `shape` in torch order (ggml lists dimensions fastest-first), `qtype` a GGMLQuantizationType
    value, `offset` from the start of the file, `num_bytes` of its stored blocks."""

    name: str
    shape: tuple[int, ...]
    qtype: int
    offset: int
    num_bytes: int

    @property
    def type_name(self) -> str:
        from gguf import GGMLQuantizationType

        return GGMLQuantizationType(self.qtype).name


class _Truncated(Exception):
    pass


class GgufFile:
    """An open GGUF file. `fields` maps metadata keys to values (LazyArray for long arrays; use `array`),
    `tensors` maps names to TensorInfo. The mapping stays open as long as this object or a view lives."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        gguf_sizes = _quant_sizes()
        try:
            self._map = np.memmap(self.path, dtype=np.uint8, mode="r")
        except (OSError, ValueError) as error:
            raise ModelFormatError(f"{self.path}: cannot open it ({error})") from None
        try:
            self.version, self.fields, self.tensors = _parse(memoryview(self._map), gguf_sizes)
        except _Truncated:
            raise ModelFormatError(f"{self.path}: not a readable GGUF file (the file is truncated)") from None
        except (ValueError, struct.error, KeyError) as error:
            raise ModelFormatError(f"{self.path}: not a readable GGUF file ({error})") from None

    def get(self, key: str, default=None):
        """A metadata value; long arrays are decoded (see `array`)."""
        value = self.fields.get(key, default)
        return self.array(key) if isinstance(value, LazyArray) else value

    def array(self, key: str):
        """A metadata array: a list of str for strings, a numpy array (a copy) for numbers."""
        value = self.fields[key]
        if not isinstance(value, LazyArray):
            return value if value is None or not value or isinstance(value[0], str) else np.asarray(value)
        if value.kind == STRING:
            return _strings(memoryview(self._map), value.offset, value.count)
        if value.kind not in NUMPY:
            raise ModelFormatError(f"{self.path}: metadata array '{key}' holds arrays, not numbers or strings")
        return np.frombuffer(self._map, NUMPY[value.kind], value.count, value.offset).copy()

    def raw(self, name: str) -> np.ndarray:
        """The stored bytes of tensor `name` as a read-only uint8 view of the mapping (no copy)."""
        info = self.tensors[name]
        return self.span(info.offset, info.num_bytes)

    def span(self, offset: int, num_bytes: int) -> np.ndarray:
        """`num_bytes` of the file from `offset`, as a read-only uint8 view (no copy)."""
        return self._map[offset:offset + num_bytes]


def _quant_sizes() -> dict:
    try:
        from gguf import GGML_QUANT_SIZES
    except ImportError:
        raise WispError('reading GGUF files needs the gguf package (a dependency of Wisp): '
                        'pip install "gguf>=0.19"') from None
    return {int(kind): sizes for kind, sizes in GGML_QUANT_SIZES.items()}


def _parse(data: memoryview, quant_sizes: dict) -> tuple[int, dict, dict[str, TensorInfo]]:
    if bytes(data[:4]) != MAGIC:
        raise ValueError("wrong magic number: not a GGUF file")
    cursor = _Cursor(data, 4)
    version, num_tensors, num_fields = cursor.unpack("<I"), cursor.unpack("<Q"), cursor.unpack("<Q")
    if version < 2:
        raise ValueError(f"GGUF version {version} is too old (llama.cpp reads 2 and 3)")
    if version > 0xFFFF:
        raise ValueError("a big-endian GGUF file; Wisp reads little-endian ones")
    fields = {}
    for _ in range(num_fields):
        key = cursor.string()
        fields[key] = cursor.value(cursor.unpack("<I"))
    infos = [cursor.tensor_info() for _ in range(num_tensors)]
    alignment = _alignment(fields.get("general.alignment", DEFAULT_ALIGNMENT))
    data_offset = -(-cursor.position // alignment) * alignment
    tensors = {}
    for name, dims, kind, offset in infos:
        if kind not in quant_sizes:
            raise ValueError(f"tensor '{name}' has type {kind}, unknown to this gguf package")
        block, type_size = quant_sizes[kind]
        count = int(np.prod(dims, dtype=np.int64)) if dims else 1
        num_bytes = count // block * type_size
        if data_offset + offset + num_bytes > len(data):
            raise _Truncated()
        tensors[name] = TensorInfo(name, tuple(reversed(dims)), kind, data_offset + offset, num_bytes)
    return version, fields, tensors


def _alignment(value) -> int:
    """general.alignment: a power of two, as llama.cpp requires (0, "0" or 0.5 would divide by zero)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value & (value - 1):
        raise ValueError(f"general.alignment is {str(value)[:40]!r}, not a power of two")
    return value


class _Cursor:
    def __init__(self, data: memoryview, position: int):
        self.data, self.position = data, position

    def unpack(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.position + size > len(self.data):
            raise _Truncated()
        value = struct.unpack_from(fmt, self.data, self.position)[0]
        self.position += size
        return value

    def string(self) -> str:
        length = self.unpack("<Q")
        end = self.position + length
        if end > len(self.data):
            raise _Truncated()
        text = str(self.data[self.position:end], "utf-8", errors="replace")
        self.position = end
        return text

    def value(self, kind: int, depth: int = 0):
        if kind == STRING:
            return self.string()
        if kind == ARRAY:
            return self.array(depth + 1)
        if kind not in SCALARS:
            raise ValueError(f"unknown metadata value type {kind}")
        return self.unpack(SCALARS[kind])

    def array(self, depth: int):
        if depth > MAX_ARRAY_NESTING:
            raise ValueError(f"metadata arrays nest deeper than {MAX_ARRAY_NESTING} levels")
        kind, count = self.unpack("<I"), self.unpack("<Q")
        if count <= EAGER_ARRAY:
            return [self.value(kind, depth) for _ in range(count)]
        lazy = LazyArray(kind, count, self.position)
        self.skip(kind, count, depth)
        return lazy

    def skip(self, kind: int, count: int, depth: int) -> None:
        if kind in SCALARS:
            self.position += count * struct.calcsize(SCALARS[kind])
        elif kind == STRING:
            self.position = _skip_strings(self.data, self.position, count)
        else:
            for _ in range(count):
                self.value(kind, depth)
        if self.position > len(self.data):
            raise _Truncated()

    def tensor_info(self) -> tuple[str, tuple[int, ...], int, int]:
        name = self.string()
        dims = tuple(self.unpack("<Q") for _ in range(self.unpack("<I")))
        return name, dims, self.unpack("<I"), self.unpack("<Q")


def _skip_strings(data: memoryview, position: int, count: int) -> int:
    unpack, size = struct.unpack_from, len(data)
    for _ in range(count):
        if position + 8 > size:
            raise _Truncated()
        position += 8 + unpack("<Q", data, position)[0]
    return position


def _strings(data: memoryview, position: int, count: int) -> list[str]:
    unpack, out = struct.unpack_from, []
    append = out.append
    for _ in range(count):
        length = unpack("<Q", data, position)[0]
        position += 8
        append(str(data[position:position + length], "utf-8", errors="replace"))
        position += length
    return out
