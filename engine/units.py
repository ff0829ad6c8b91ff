"""Human sizes: parse '12GiB' / '12G' / '1500MB' / bytes, and format bytes back."""

from __future__ import annotations

import re
from fractions import Fraction

from engine.errors import RequestError

MAX_SIZE = 1024**6  # 1 EiB: past any memory, and every size stays exact in a float
MAX_DIGITS = 24  # digits read before and after the point; more cannot change a size below MAX_SIZE
UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1000, "kib": 1024, "m": 1024**2, "mb": 1000**2, "mib": 1024**2,
         "g": 1024**3, "gb": 1000**3, "gib": 1024**3, "t": 1024**4, "tb": 1000**4, "tib": 1024**4}


def parse_size(text: str) -> int:
    """'12GiB', '12G' (binary), '12GB' (decimal), '0.5GiB' or a plain byte count -> bytes."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
    shown = str(text) if len(str(text)) <= 40 else f"{str(text)[:20]}... ({len(str(text))} characters)"
    if not match or match.group(2).lower() not in UNITS:
        raise RequestError(f"cannot read size '{shown}': use e.g. 12GiB, 12G, 1500MB or a byte count")
    whole, _, fraction = match.group(1).partition(".")
    whole = whole.lstrip("0")  # exact arithmetic below: a float of 400 nines is inf, and int(inf) raises
    number = Fraction(f"{whole or 0}.{fraction[:MAX_DIGITS] or 0}") if len(whole) <= MAX_DIGITS else MAX_SIZE + 1
    size = int(number * UNITS[match.group(2).lower()])
    if size > MAX_SIZE:
        raise RequestError(f"size '{shown}' is larger than 1 EiB; use e.g. 12GiB")
    return size


def format_bytes(num_bytes: float) -> str:
    """The one way Wisp shows a size: MiB under 1 GiB, else GiB, one decimal (KiB under 1 MiB, bytes under 1 KiB,
    where a size is that small)."""
    size = abs(num_bytes)
    if size < 1024:
        return f"{int(num_bytes)} B"
    for unit, scale in (("KiB", 1024), ("MiB", 1024**2)):
        if size < scale * 1024:
            return f"{num_bytes / scale:.1f} {unit}"
    return f"{num_bytes / 1024**3:.1f} GiB"
