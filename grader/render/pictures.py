"""Draw a check's picture (a dict from ``grader.checking.grid_picture``) as text or SVG.

A picture holds two cropped grids of small integers, ``expected`` and ``submitted``, the
crop's ``origin`` in the full grid of ``shape``, and ``labels`` mapping each value (as a
string) to one character. Masks are 0/1, tile classes 0/1/2 (SKIP/PARTIAL/FULL); both are
drawn the same way: expected, submitted, and the cells that differ.
"""
from __future__ import annotations

from html import escape

DIFF_MARK, SAME_MARK, MISSING_MARK = "X", ".", " "
LIGHT, MID, DARK, OTHER = "#eef1f6", "#8fb0d8", "#1f4e8c", "#c9a227"
DIFF_FILL, SAME_FILL = "#d9412b", "#ffffff"
SIDE_BY_SIDE_MAX = 110  # characters: wider pictures are stacked instead


def _cell(grid: list, r: int, c: int):
    return grid[r][c] if r < len(grid) and c < len(grid[r]) else None


def _size(picture: dict) -> tuple[int, int]:
    grids = (picture["expected"], picture["submitted"])
    return max(len(g) for g in grids), max((len(row) for g in grids for row in g), default=0)


def differs(picture: dict, r: int, c: int) -> bool:
    return _cell(picture["expected"], r, c) != _cell(picture["submitted"], r, c)


def differing_cells(picture: dict) -> int:
    rows, cols = _size(picture)
    return sum(differs(picture, r, c) for r in range(rows) for c in range(cols))


def _symbol(picture: dict, value) -> str:
    if value is None:
        return MISSING_MARK
    return picture.get("labels", {}).get(str(value), str(value)[-1])


def extent(picture: dict) -> str:
    """Which part of the full grid the crop shows, e.g. 'rows 0-4 of 5, columns 0-10 of 11'."""
    rows, cols = _size(picture)
    (full_r, full_c), (r0, c0) = picture["shape"], picture.get("origin", [0, 0])
    return (f"rows {r0}-{r0 + max(rows, 1) - 1} of {full_r}, "
            f"columns {c0}-{c0 + max(cols, 1) - 1} of {full_c}")


def legend(picture: dict) -> str:
    labels = picture.get("labels", {})
    parts = [f"{sym} = {value}" for value, sym in sorted(labels.items())]
    return ", ".join(parts + [f"{DIFF_MARK} = differs"])


def text(picture: dict) -> str:
    """Expected, submitted and differing cells as characters, side by side when they fit."""
    rows, cols = _size(picture)
    panels = {
        "expected": ["".join(_symbol(picture, _cell(picture["expected"], r, c)) for c in range(cols))
                     for r in range(rows)],
        "submitted": ["".join(_symbol(picture, _cell(picture["submitted"], r, c)) for c in range(cols))
                      for r in range(rows)],
        "differ": ["".join(DIFF_MARK if differs(picture, r, c) else SAME_MARK for c in range(cols))
                   for r in range(rows)],
    }
    r0 = picture.get("origin", [0, 0])[0]
    gutter = len(str(r0 + rows - 1))
    head = [picture.get("title", ""), f"({extent(picture)}; {legend(picture)})"]
    width = max(cols, len("submitted"))
    if gutter + 2 + 3 * (width + 2) <= SIDE_BY_SIDE_MAX:
        lines = [" " * (gutter + 2) + "  ".join(name.ljust(width) for name in panels)]
        for r in range(rows):
            lines.append(f"{r0 + r:>{gutter}}  " + "  ".join(p[r].ljust(width) for p in panels.values()))
    else:
        lines = []
        for name, panel in panels.items():
            lines.append(name)
            lines += [f"{r0 + r:>{gutter}}  {line}" for r, line in enumerate(panel)]
    return "\n".join(head + [line.rstrip() for line in lines])


def _palette(picture: dict) -> dict[int, str]:
    values = sorted(int(v) for v in picture.get("labels", {"0": ".", "1": "#"}))
    shades = {1: [DARK], 2: [LIGHT, DARK], 3: [LIGHT, MID, DARK]}.get(len(values))
    if shades is None:
        shades = [LIGHT, MID, DARK] + [OTHER] * max(0, len(values) - 3)
    return dict(zip(values, shades))


def svg(picture: dict, max_panel_px: int = 330) -> str:
    """Three grids as one inline SVG: expected, submitted, and the cells that differ (red).

    Each run of equal cells in a row is one rectangle; thin lines then draw the cell grid."""
    rows, cols = _size(picture)
    cell = max(4, min(22, max_panel_px // max(cols, 1), 240 // max(rows, 1)))
    gap, top, pad = 28, 22, 1
    panel_w, panel_h = cols * cell, rows * cell
    step = max(panel_w, 72) + gap  # room for each panel's name even when the grid is narrow
    width, height = 2 * step + panel_w + 2 * pad, panel_h + top + 2 * pad
    palette = _palette(picture)
    title = escape(picture.get("title", "picture"))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" class="grid" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}"><title>{title}: expected, submitted, differing cells</title>']
    names = ("expected", "submitted", "differ")
    for i, name in enumerate(names):
        x0 = pad + i * step
        out.append(f'<text x="{x0}" y="14" font-size="12" font-family="sans-serif" fill="#333">{name}</text>')
        out.append(f'<g transform="translate({x0},{top})">')
        for r in range(rows):
            fills = [_fill(picture, name, palette, r, c) for c in range(cols)]
            c = 0
            while c < cols:  # one rectangle per run of equal cells keeps the file small
                run = 1
                while c + run < cols and fills[c + run] == fills[c]:
                    run += 1
                out.append(f'<rect x="{c * cell}" y="{r * cell}" width="{run * cell}" height="{cell}" '
                           f'fill="{fills[c]}"/>')
                c += run
        stroke = 'stroke="#b8c0cc" stroke-width="0.5"'
        out += [f'<line x1="0" y1="{r * cell}" x2="{panel_w}" y2="{r * cell}" {stroke}/>' for r in range(rows + 1)]
        out += [f'<line x1="{c * cell}" y1="0" x2="{c * cell}" y2="{panel_h}" {stroke}/>' for c in range(cols + 1)]
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def _fill(picture: dict, name: str, palette: dict, r: int, c: int) -> str:
    if name == "differ":
        return DIFF_FILL if differs(picture, r, c) else SAME_FILL
    value = _cell(picture[name], r, c)
    return "none" if value is None else palette.get(value, OTHER)


def svg_legend(picture: dict) -> list[tuple[str, str]]:
    """(colour, meaning) pairs for the HTML legend under a picture."""
    palette, labels = _palette(picture), picture.get("labels", {})
    items = [(palette[int(v)], f"{labels[v]} {v}") for v in sorted(labels, key=int) if int(v) in palette]
    return items + [(DIFF_FILL, "differs")]
