"""The synthetic payload of the Rust harness (`batchweave produce` / `consume`), in Python:
every byte of slice ``s`` of the TGB with sequence ``q`` of producer ``p`` is a function of
``(p, q, s)``, so the Rust CLI verifies what a Python producer wrote, and back.

Two generations of the scheme are implemented (plain splitmix words, and a
``producer|sequence|slice|`` header followed by filler); :func:`detect` tells from bytes
the Rust producer wrote which one the CLI in use has."""

from __future__ import annotations

import zlib
from typing import List

M64 = (1 << 64) - 1


def _fnv1a(s: str) -> int:
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def slice_bytes_v1(producer: str, sequence: int, slice_index: int, length: int) -> bytes:
    state = (
        _fnv1a(producer)
        ^ ((sequence * 0xA0761D6478BD642F) & M64)
        ^ ((slice_index * 0xE7037ED1A0B428DB) & M64)
    )
    out = bytearray()
    while len(out) < length:
        state = (state + 0x9E3779B97F4A7C15) & M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        z ^= z >> 31
        out += z.to_bytes(8, "little")
    return bytes(out[:length])


def _splitmix64(z: int) -> int:
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _fnv(key: int, data: bytes) -> int:
    for b in data:
        key = ((key ^ b) * 0x100000001B3) & M64
    return key


def slice_bytes_v2(producer: str, sequence: int, slice_index: int, length: int) -> bytes:
    out = bytearray(f"{producer}|{sequence}|{slice_index}|".encode()[:length])
    filler = length - len(out)
    key = _fnv(_fnv(0xCBF29CE484222325, producer.encode()), sequence.to_bytes(8, "little"))
    tweak = slice_index & 0xFF
    for i in range(filler):
        k, j = divmod(i, 64)
        if k > 0 and j == 0:
            key = _splitmix64(key ^ ((slice_index << 32) & M64) ^ k)
        rot = ((key << j) | (key >> (64 - j))) & M64 if j else key
        out.append((rot & 0xFF) ^ tweak)
    return bytes(out)


SCHEMES = {"v1": slice_bytes_v1, "v2": slice_bytes_v2}
_scheme = "v2"


def detect(producer: str, sequence: int, slice_index: int, observed: bytes) -> str:
    """Selects (and returns) the scheme that reproduces bytes the Rust CLI wrote."""
    global _scheme
    for name, f in SCHEMES.items():
        if f(producer, sequence, slice_index, len(observed)) == observed:
            _scheme = name
            return name
    raise AssertionError(
        "the Rust harness's payload scheme matches neither v1 nor v2: update tests/payload.py"
    )


def slice_bytes(producer: str, sequence: int, slice_index: int, length: int) -> bytes:
    return SCHEMES[_scheme](producer, sequence, slice_index, length)


def tgb_slices(producer: str, sequence: int, dp: int, cp: int, length: int) -> List[bytes]:
    return [slice_bytes(producer, sequence, s, length) for s in range(dp * cp)]


def crc32_hex(parts: List[bytes]) -> str:
    crc = 0
    for p in parts:
        crc = zlib.crc32(p, crc)
    return f"{crc:08x}"


def item_slices(item: int, dp: int, cp: int, length: int) -> List[bytes]:
    """Slices that name their source item: ``item:<n>:<slice>:`` then filler."""
    out = []
    for s in range(dp * cp):
        head = f"item:{item:08d}:{s:04d}:".encode()
        out.append((head + b"x" * length)[: max(length, len(head))])
    return out


def item_of(data: bytes) -> int:
    assert data.startswith(b"item:"), data[:32]
    return int(data[5:13])
