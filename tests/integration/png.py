"""Reading a PNG in tests without an imaging library: zlib and the PNG filters."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path


def png_rgb(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and the RGB rows of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium
    writes), decoded with zlib alone."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, "unexpected PNG layout"
    channels = 4 if colour == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up = previous[x]
            corner = previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                best = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[x] = (line[x] + best) & 0xFF
        previous = line
        rgb = bytes(b for x in range(width) for b in line[x * channels : x * channels + 3])
        rows.append(rgb)
    return width, height, rows


def pixels(path: Path) -> dict[tuple[int, int, int], int]:
    """How many pixels of each RGB colour the image has."""
    _, _, rows = png_rgb(path)
    counts: dict[tuple[int, int, int], int] = {}
    for row in rows:
        for x in range(0, len(row), 3):
            colour = (row[x], row[x + 1], row[x + 2])
            counts[colour] = counts.get(colour, 0) + 1
    return counts
