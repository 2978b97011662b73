"""A line plot as PNG: matplotlib when installed, else a dependency-free raster (lines, no text)."""

import itertools
import math
import struct
import zlib
from pathlib import Path

COLORS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40)]


def line_plot(xs: list[float], series: dict[str, list[float]], path: Path, title: str = "") -> None:
    try:
        from temper.runtime import pyplot

        plt = pyplot()
    except ImportError:
        _raster(xs, series, path)
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (name, ys), c in zip(series.items(), COLORS, strict=False):
        ax.plot(xs, ys, marker="o", label=name, color=[v / 255 for v in c])
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context tokens")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def _raster(xs: list[float], series: dict[str, list[float]], path: Path, w: int = 640, h: int = 400) -> None:
    """Log2 x axis; each series scaled to its own maximum (colours as in COLORS, in series order)."""
    img = [[(255, 255, 255)] * w for _ in range(h)]
    pad = 30

    def put(x: int, y: int, c: tuple[int, int, int]) -> None:
        for dx in (0, 1):
            for dy in (0, 1):
                if 0 <= x + dx < w and 0 <= y + dy < h:
                    img[y + dy][x + dx] = c

    for x in range(pad, w - pad):
        put(x, h - pad, (0, 0, 0))
    for y in range(pad, h - pad):
        put(pad, y, (0, 0, 0))
    if len(xs) >= 1:
        lo, hi = math.log2(min(xs)), math.log2(max(xs)) + 1e-9
        for (_, ys), c in zip(series.items(), COLORS, strict=False):
            top = max(ys) or 1.0
            pts = [(pad + (math.log2(x) - lo) / (hi - lo) * (w - 2 * pad), h - pad - y / top * (h - 2 * pad))
                   for x, y in zip(xs, ys, strict=True)]
            for (x0, y0), (x1, y1) in itertools.pairwise(pts):
                steps = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
                for i in range(steps + 1):
                    put(int(x0 + (x1 - x0) * i / steps), int(y0 + (y1 - y0) * i / steps), c)
            for x, y in pts:
                for dx in range(-3, 4):
                    for dy in range(-3, 4):
                        put(int(x) + dx, int(y) + dy, c)
    raw = b"".join(b"\x00" + bytes(v for px in row for v in px) for row in img)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    Path(path).write_bytes(png)
