"""A fast reader of a GGUF file's header: metadata key/values and tensor infos, never the tensor data.

gguf.GGUFReader builds two numpy views per vocabulary string: 33 s for a 152k-token vocabulary on this
project's 2-core machines, too slow for the model picker. This walks the same format (gguf's docs/gguf.md)
with struct over an mmap and skips large arrays; sizes of tensor types come from the gguf package.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from engine.errors import ModelFormatError

MAGIC = b"GGUF"
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9
MAX_KEPT_ARRAY = 4096  # longer arrays (the vocabulary, merges) are skipped and read as None
DEFAULT_ALIGNMENT = 32


@dataclass(frozen=True)
class TensorEntry:
    name: str
    shape: tuple[int, ...]  # ggml order: the fastest-varying dimension first
    type: int  # GGMLQuantizationType
    offset: int  # from the start of the data section
    num_bytes: int


@dataclass(frozen=True)
class GgufHeader:
    version: int
    fields: dict[str, object]
    tensors: list[TensorEntry]
    data_offset: int


class TruncatedError(Exception):
    pass


class _Cursor:
    def __init__(self, data: mmap.mmap):
        self.data, self.position = data, 0

    def unpack(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.position + size > len(self.data):
            raise TruncatedError()
        value = struct.unpack_from(fmt, self.data, self.position)[0]
        self.position += size
        return value

    def string(self) -> str:
        length = self.unpack("<Q")
        if self.position + length > len(self.data):
            raise TruncatedError()
        text = self.data[self.position:self.position + length].decode("utf-8", errors="replace")
        self.position += length
        return text

    def value(self, kind: int):
        if kind == STRING:
            return self.string()
        if kind == ARRAY:
            return self.array()
        if kind not in SCALARS:
            raise ValueError(f"unknown metadata value type {kind}")
        return self.unpack(SCALARS[kind])

    def array(self):
        kind, count = self.unpack("<I"), self.unpack("<Q")
        if count > MAX_KEPT_ARRAY:
            self.skip_array(kind, count)
            return None
        return [self.value(kind) for _ in range(count)]

    def skip_array(self, kind: int, count: int) -> None:
        if kind in SCALARS:
            self.position += count * struct.calcsize(SCALARS[kind])
            return
        for _ in range(count):
            if kind == STRING:
                length = self.unpack("<Q")  # read before adding: `position += unpack()` would lose its advance
                self.position += length
            else:
                self.value(kind)
        if self.position > len(self.data):
            raise TruncatedError()


def read_header(path: Path) -> GgufHeader:
    """Raises ModelFormatError naming the file when it is not GGUF, is truncated or is malformed."""
    try:
        with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            header = _parse(_Cursor(data))
            _check_complete(header, len(data))
            return header
    except TruncatedError:
        raise ModelFormatError(f"{path}: not a readable GGUF file (the file is truncated)") from None
    except (ValueError, OSError, struct.error, KeyError) as error:
        raise ModelFormatError(f"{path}: not a readable GGUF file ({error})") from None


def _parse(cursor: _Cursor) -> GgufHeader:
    if cursor.data[:4] != MAGIC:
        raise ValueError("wrong magic number: not a GGUF file")
    cursor.position = 4
    version, num_tensors, num_fields = cursor.unpack("<I"), cursor.unpack("<Q"), cursor.unpack("<Q")
    if version < 2:
        raise ValueError(f"GGUF version {version} is too old (llama.cpp reads 2 and 3)")
    fields = {}
    for _ in range(num_fields):
        key = cursor.string()
        fields[key] = cursor.value(cursor.unpack("<I"))
    infos = [_tensor_info(cursor) for _ in range(num_tensors)]
    alignment = int(fields.get("general.alignment") or DEFAULT_ALIGNMENT)
    data_offset = -(-cursor.position // alignment) * alignment
    return GgufHeader(version, fields, infos, data_offset)


def _tensor_info(cursor: _Cursor) -> TensorEntry:
    name = cursor.string()
    shape = tuple(cursor.unpack("<Q") for _ in range(cursor.unpack("<I")))
    kind, offset = cursor.unpack("<I"), cursor.unpack("<Q")
    return TensorEntry(name, shape, kind, offset, tensor_bytes(shape, kind))


def tensor_bytes(shape: tuple[int, ...], kind: int) -> int:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    block_size, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
    count = 1
    for dim in shape:
        count *= dim
    return count // block_size * type_size


def _check_complete(header: GgufHeader, file_size: int) -> None:
    end = max((t.offset + t.num_bytes for t in header.tensors), default=0)
    if header.data_offset + end > file_size:
        raise TruncatedError()
