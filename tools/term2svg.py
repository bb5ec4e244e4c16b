#!/usr/bin/env python3
"""Renders terminal text (stdin) as an SVG picture for the docs:
    tickguard stat --once | tools/term2svg.py > docs/stat.svg
Rows whose verdict column says ok are drawn green, stale (either) red, any other verdict amber."""
import html
import sys

lines = sys.stdin.read().rstrip("\n").split("\n")
cw, lh, pad = 7.8, 17, 14
width = int(max(len(l) for l in lines) * cw + 2 * pad)
height = int(len(lines) * lh + 2 * pad)
out = [
    f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
    f'<rect width="{width}" height="{height}" rx="6" fill="#1e1e1e"/>',
]
for i, line in enumerate(lines):
    colour = "#d4d4d4"
    words = line.split()
    if len(words) > 2 and not line.startswith(("feed ", " ", "tickguard", "writer")):
        verdict = words[2]
        colour = "#6a9955" if verdict == "ok" else ("#f14c4c" if "stale" in verdict else "#d7ba7d")
    elif line.startswith("feed       symbol"):
        colour = "#9cdcfe"
    y = pad + (i + 1) * lh - 4
    out.append(
        f'<text x="{pad}" y="{y}" fill="{colour}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" '
        f'font-size="13" xml:space="preserve">{html.escape(line)}</text>'
    )
out.append("</svg>")
print("\n".join(out))
