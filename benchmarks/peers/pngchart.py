"""A grouped bar chart written as PNG with zlib and struct only (no matplotlib).

Text uses a built-in 3x5 pixel font (upper-case letters, digits, a few signs),
scaled up; lower-case input is drawn in upper case.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Canvas", "Panel", "bar_chart"]

Color = tuple[int, int, int]

# Each glyph: 5 rows of 3 bits, top row first.
_FONT: dict[str, tuple[int, ...]] = {
    "0": (7, 5, 5, 5, 7), "1": (2, 6, 2, 2, 7), "2": (7, 1, 7, 4, 7), "3": (7, 1, 7, 1, 7),
    "4": (5, 5, 7, 1, 1), "5": (7, 4, 7, 1, 7), "6": (7, 4, 7, 5, 7), "7": (7, 1, 1, 2, 2),
    "8": (7, 5, 7, 5, 7), "9": (7, 5, 7, 1, 7),
    "A": (2, 5, 7, 5, 5), "B": (6, 5, 6, 5, 6), "C": (3, 4, 4, 4, 3), "D": (6, 5, 5, 5, 6),
    "E": (7, 4, 6, 4, 7), "F": (7, 4, 6, 4, 4), "G": (3, 4, 5, 5, 3), "H": (5, 5, 7, 5, 5),
    "I": (7, 2, 2, 2, 7), "J": (1, 1, 1, 5, 2), "K": (5, 5, 6, 5, 5), "L": (4, 4, 4, 4, 7),
    "M": (5, 7, 7, 5, 5), "N": (6, 5, 5, 5, 5), "O": (2, 5, 5, 5, 2), "P": (6, 5, 6, 4, 4),
    "Q": (2, 5, 5, 6, 3), "R": (6, 5, 6, 5, 5), "S": (3, 4, 2, 1, 6), "T": (7, 2, 2, 2, 2),
    "U": (5, 5, 5, 5, 7), "V": (5, 5, 5, 5, 2), "W": (5, 5, 7, 7, 5), "X": (5, 5, 2, 5, 5),
    "Y": (5, 5, 2, 2, 2), "Z": (7, 1, 2, 4, 7),
    " ": (0, 0, 0, 0, 0), "-": (0, 0, 7, 0, 0), ".": (0, 0, 0, 0, 2), "/": (1, 1, 2, 4, 4),
    "(": (1, 2, 2, 2, 1), ")": (4, 2, 2, 2, 4), ",": (0, 0, 0, 2, 4), ":": (0, 2, 0, 2, 0),
    "%": (5, 1, 2, 4, 5), "=": (0, 7, 0, 7, 0), "+": (0, 2, 7, 2, 0), "_": (0, 0, 0, 0, 7),
}

PALETTE: tuple[Color, ...] = (
    (31, 119, 180), (174, 199, 232), (255, 127, 14), (255, 187, 120), (44, 160, 44),
    (214, 39, 40), (148, 103, 189), (140, 86, 75),
)


class Canvas:
    """An RGB pixel buffer that can be saved as PNG."""

    def __init__(self, width: int, height: int, background: Color = (255, 255, 255)) -> None:
        self.width = width
        self.height = height
        self.rows = [bytearray(bytes(background) * width) for _ in range(height)]

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        """Fill the rectangle [x0, x1) x [y0, y1), clipped to the canvas."""
        x0, x1 = max(0, min(x0, x1)), min(self.width, max(x0, x1))
        y0, y1 = max(0, min(y0, y1)), min(self.height, max(y0, y1))
        if x0 >= x1:
            return
        span = bytes(color) * (x1 - x0)
        for y in range(y0, y1):
            self.rows[y][3 * x0 : 3 * x1] = span

    def text(self, x: int, y: int, text: str, color: Color = (0, 0, 0), scale: int = 2) -> int:
        """Draw ``text`` with its top-left corner at (x, y); return its width in pixels."""
        start = x
        for ch in text.upper():
            glyph = _FONT.get(ch, _FONT["_"])
            for row, bits in enumerate(glyph):
                for col in range(3):
                    if bits & (4 >> col):
                        px, py = x + col * scale, y + row * scale
                        self.rect(px, py, px + scale, py + scale, color)
            x += 4 * scale
        return x - start

    def png(self) -> bytes:
        """The canvas encoded as an 8-bit RGB PNG."""
        raw = b"".join(b"\x00" + bytes(row) for row in self.rows)

        def chunk(kind: bytes, data: bytes) -> bytes:
            body = kind + data
            return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b"")
        )


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1)
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value:
            return float(step * magnitude)
    return float(10 * magnitude)


def _short(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.1f}M"
    if value >= 1e3:
        return f"{value / 1e3:.0f}K"
    return f"{value:.0f}"


@dataclass(frozen=True)
class Panel:
    """One grouped bar plot: ``values[group][series]`` (None = no bar)."""

    title: str
    groups: Sequence[str]
    values: Sequence[Sequence[float | None]]


def _draw_panel(canvas: Canvas, panel: Panel, box: tuple[int, int, int, int],
                title_scale: int) -> None:
    """Draw ``panel`` with its axes inside ``box`` = (x0, y0, x1, y1)."""
    x0, y0, x1, y1 = box
    left, top, bottom = x0 + 70, y0 + 35, y1 - 25
    plot_w, plot_h = x1 - left, bottom - top
    canvas.text(x0 + 20, y0 + 5, panel.title, scale=title_scale)
    peak = _nice_max(max((v for row in panel.values for v in row if v is not None),
                         default=1.0))
    for tick in range(5):
        level = peak * tick / 4
        y = top + plot_h - int(plot_h * tick / 4)
        canvas.rect(left, y, left + plot_w, y + 1, (220, 220, 220))
        label = _short(level)
        canvas.text(left - 10 - 8 * len(label), y - 5, label)
    canvas.rect(left, top, left + 1, top + plot_h, (0, 0, 0))
    canvas.rect(left, top + plot_h, left + plot_w, top + plot_h + 1, (0, 0, 0))
    group_w = plot_w / max(1, len(panel.groups))
    series = max((len(row) for row in panel.values), default=1)
    bar_w = max(2, int(group_w * 0.8 / max(1, series)))
    for g, name in enumerate(panel.groups):
        gx = left + int(g * group_w + group_w * 0.1)
        for index, value in enumerate(panel.values[g]):
            if value is None:
                continue
            bar_h = int(plot_h * value / peak)
            x = gx + index * bar_w
            canvas.rect(x, top + plot_h - bar_h, x + bar_w - 1, top + plot_h,
                        PALETTE[index % len(PALETTE)])
        label_x = left + int(g * group_w + group_w / 2) - 4 * len(name)
        canvas.text(label_x, top + plot_h + 8, name)


def bar_chart(
    title: str,
    groups: Sequence[str],
    series: Sequence[str],
    values: Sequence[Sequence[float | None]],
    *,
    below: Sequence[Panel] = (),
    width: int = 1200,
    height: int = 560,
) -> bytes:
    """PNG bytes of a grouped bar chart: ``values[group][series]`` (None = no bar),
    and under it the ``below`` panels side by side, each with its own axis (their
    series are the same, in the same colours), then the legend."""
    legend_h = 22 * ((len(series) + 2) // 3)
    below_h = 260 if below else 0
    canvas = Canvas(width, height + below_h)
    main_bottom = height - 15 - legend_h
    _draw_panel(canvas, Panel(title, groups, values), (20, 10, width - 20, main_bottom), 3)
    if below:
        cell = (width - 20) // len(below)
        for i, panel in enumerate(below):
            box = (20 + i * cell, main_bottom + 10, 20 + (i + 1) * cell - 20,
                   main_bottom + below_h)
            _draw_panel(canvas, panel, box, 2)
    for s, name in enumerate(series):
        lx = 90 + (s % 3) * ((width - 110) // 3)
        ly = height + below_h - legend_h - 5 + 22 * (s // 3)
        canvas.rect(lx, ly, lx + 14, ly + 14, PALETTE[s % len(PALETTE)])
        canvas.text(lx + 20, ly + 2, name)
    return canvas.png()
