"""A tiny raster canvas that saves PNG: rectangles and text in a 3x5 pixel font.

Enough for bar charts without a plotting dependency (matplotlib is not one of
rocketkafka's); the PNG is written with :mod:`zlib` and :mod:`struct` only. The
font and encoder follow ``spark/charts.py``'s fallback renderer, with more glyphs
(``, + _ [ ] ' ! ? * # |``) and a way to measure text.

>>> canvas = Canvas(40, 12)
>>> canvas.text(1, 1, "ok", scale=2)
>>> canvas.png()[:8] == PNG_SIGNATURE
True
"""

from __future__ import annotations

import struct
import zlib

Color = tuple[int, int, int]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
BLACK: Color = (0, 0, 0)
WHITE: Color = (255, 255, 255)

#: 3x5 glyphs, rows top to bottom, '#' = ink; text is drawn lower-cased.
FONT = {
    "0": "###,#.#,#.#,#.#,###", "1": ".#.,##.,.#.,.#.,###", "2": "###,..#,###,#..,###", "3": "###,..#,.##,..#,###",
    "4": "#.#,#.#,###,..#,..#", "5": "###,#..,###,..#,###", "6": "###,#..,###,#.#,###", "7": "###,..#,..#,.#.,.#.",
    "8": "###,#.#,###,#.#,###", "9": "###,#.#,###,..#,###", "a": ".#.,#.#,###,#.#,#.#", "b": "##.,#.#,##.,#.#,##.",
    "c": "###,#..,#..,#..,###", "d": "##.,#.#,#.#,#.#,##.", "e": "###,#..,##.,#..,###", "f": "###,#..,##.,#..,#..",
    "g": "###,#..,#.#,#.#,###", "h": "#.#,#.#,###,#.#,#.#", "i": "###,.#.,.#.,.#.,###", "j": "..#,..#,..#,#.#,###",
    "k": "#.#,#.#,##.,#.#,#.#", "l": "#..,#..,#..,#..,###", "m": "#.#,###,###,#.#,#.#", "n": "##.,#.#,#.#,#.#,#.#",
    "o": "###,#.#,#.#,#.#,###", "p": "###,#.#,###,#..,#..", "q": "###,#.#,#.#,###,..#", "r": "##.,#.#,##.,#.#,#.#",
    "s": "###,#..,###,..#,###", "t": "###,.#.,.#.,.#.,.#.", "u": "#.#,#.#,#.#,#.#,###", "v": "#.#,#.#,#.#,#.#,.#.",
    "w": "#.#,#.#,###,###,#.#", "x": "#.#,#.#,.#.,#.#,#.#", "y": "#.#,#.#,.#.,.#.,.#.", "z": "###,..#,.#.,#..,###",
    "<": "..#,.#.,#..,.#.,..#", ">": "#..,.#.,..#,.#.,#..", "=": "...,###,...,###,...", "-": "...,...,###,...,...",
    "(": ".#.,#..,#..,#..,.#.", ")": ".#.,..#,..#,..#,.#.", ".": "...,...,...,...,.#.", ":": "...,.#.,...,.#.,...",
    " ": "...,...,...,...,...", "%": "#.#,..#,.#.,#..,#.#", "/": "..#,..#,.#.,#..,#..", ",": "...,...,...,.#.,#..",
    "+": "...,.#.,###,.#.,...", "_": "...,...,...,...,###", "[": "##.,#..,#..,#..,##.", "]": ".##,..#,..#,..#,.##",
    "'": ".#.,.#.,...,...,...", "!": ".#.,.#.,.#.,...,.#.", "?": "###,..#,.#.,...,.#.", "*": "#.#,.#.,#.#,...,...",
    "#": "#.#,###,#.#,###,#.#", "|": ".#.,.#.,.#.,.#.,.#.", "`": "#..,.#.,...,...,...",
}
_GLYPHS = {ch: [(x, y) for y, line in enumerate(g.split(",")) for x, c in enumerate(line) if c == "#"]
           for ch, g in FONT.items()}


def text_width(text: str, scale: int = 2) -> int:
    """Pixels ``text`` takes at ``scale`` (each glyph 3 wide plus 1 of spacing)."""
    return len(text) * 4 * scale


class Canvas:
    """An RGB image, white to start with."""

    def __init__(self, width: int, height: int) -> None:
        if width < 1 or height < 1:
            raise ValueError(f"canvas size must be positive, got {width}x{height}")
        self.width, self.height = width, height
        self.pixels = bytearray(b"\xff" * (width * height * 3))

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        """Fill [x0, x1) x [y0, y1), clipped to the canvas."""
        x0, x1 = max(0, min(x0, x1)), min(self.width, max(x0, x1))
        y0, y1 = max(0, min(y0, y1)), min(self.height, max(y0, y1))
        if x0 >= x1:
            return
        row = bytes(color) * (x1 - x0)
        for y in range(y0, y1):
            start = (y * self.width + x0) * 3
            self.pixels[start:start + len(row)] = row

    def text(self, x: int, y: int, text: str, scale: int = 2, color: Color = BLACK) -> None:
        """Draw ``text`` with its top-left corner at (x, y); unknown characters draw as spaces."""
        for ch in text.lower():
            for gx, gy in _GLYPHS.get(ch, ()):
                self.rect(x + gx * scale, y + gy * scale, x + (gx + 1) * scale, y + (gy + 1) * scale, color)
            x += 4 * scale

    def png(self) -> bytes:
        """The image as PNG bytes (8-bit RGB, no filtering)."""
        stride = self.width * 3
        raw = b"".join(b"\x00" + bytes(self.pixels[y * stride:(y + 1) * stride]) for y in range(self.height))
        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return PNG_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, 6)) + _chunk(b"IEND", b"")


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
