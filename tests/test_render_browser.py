"""The HTML picture in a real browser: headless Chromium renders the page of the shipped ResNet-18 (and of a
model with every kind of operation) to a PNG, offline, and the PNG shows the boxes in their colours.

The PNG is read with zlib and struct (no imaging package). Skips without Chromium; with CI set it fails
instead (`.ci/run` installs Chromium)."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path

import pytest
from test_render import mixed_model

import skriptnd
from skriptnd.render import to_html
from skriptnd.render.colours import STYLES
from skriptnd.tosa.legalize import coverage

ROOT = Path(__file__).resolve().parents[1]
WIDTH, HEIGHT = 1400, 1000


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI"):
        pytest.fail("Chromium is not installed (apt-get install chromium): the browser test needs it under CI")
    pytest.skip("Chromium is not installed (apt-get install chromium)")


def _browse(page: Path, tmp: Path, *what: str, fragment: str = "") -> subprocess.CompletedProcess[str]:
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--force-color-profile=srgb", f"--user-data-dir={tmp / 'profile'}", *what,
           f"--window-size={WIDTH},{HEIGHT}", page.resolve().as_uri() + fragment]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def screenshot(page: Path, tmp: Path, fragment: str = "") -> Path:
    png = tmp / (page.stem + ".png")
    png.unlink(missing_ok=True)
    _browse(page, tmp, f"--screenshot={png}", fragment=fragment)
    assert png.is_file()
    return png


def read_png(path: Path) -> tuple[int, int, list[tuple[int, int, int]]]:
    """(width, height, RGB pixels) of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    assert header is not None
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytearray] = []
    prev = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(line)
        prev = line
    pixels = [(r[x], r[x + 1], r[x + 2]) for r in rows for x in range(0, stride, channels)]
    return width, height, pixels


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16)


def _fills(pixels: list[tuple[int, int, int]]) -> dict[str, int]:
    counts = Counter(pixels)
    return {key: counts[_rgb(style.fill)] for key, style in STYLES.items()}


def test_resnet18_page_renders_offline_with_its_tosa_colour(tmp_path: Path) -> None:
    graph = skriptnd.load(ROOT / "models" / "resnet18").compose()
    page = tmp_path / "resnet18.html"
    page.write_text(to_html(graph), encoding="utf-8")
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", page.read_text(encoding="utf-8")))
    assert urls == {"http://www.w3.org/2000/svg"}, urls  # nothing to fetch: the page works offline
    width, height, pixels = read_png(screenshot(page, tmp_path))
    assert (width, height) == (WIDTH, HEIGHT)
    counts = Counter(pixels)
    white = counts[(255, 255, 255)] + counts[(250, 250, 250)]
    assert white < 0.97 * len(pixels) and len(counts) > 50  # not blank: boxes, text, edges
    # every ResNet-18 operation legalizes (sknd compose --tosa: 68 of 68), so the boxes in view are TOSA green
    # (a 3x3 conv's box alone is about 170 x 60 pixels) and no box has another operation colour
    assert all(ok for _, ok, _ in coverage(graph))
    fills = _fills(pixels)
    assert fills["tosa"] > 20_000, fills
    assert fills["io"] > 1_000, fills  # the graph input's pill (and the legend swatch)
    assert fills["kernel"] == fills["lower"] == fills["control"] == fills["unsupported"] == 0, fills


def test_every_kind_of_operation_shows_its_colour(tmp_path: Path) -> None:
    graph = skriptnd.load(mixed_model(tmp_path / "m")).compose()
    page = tmp_path / "mixed.html"
    page.write_text(to_html(graph), encoding="utf-8")
    _, _, pixels = read_png(screenshot(page, tmp_path))
    fills = _fills(pixels)
    # one box each for the kernel, @lower and control-flow operations, two TOSA boxes (about 120 x 50 pixels
    # each, the @lower one smaller: about 70 x 50), plus a legend swatch per colour
    for key, least in (("tosa", 6_000), ("kernel", 2_000), ("lower", 2_000), ("control", 2_000), ("io", 2_000)):
        assert fills[key] > least, (key, fills)


def test_the_page_script_searches_and_highlights(tmp_path: Path) -> None:
    """The inline script runs in the browser: a search given in the link (#search=nn.relu) counts the boxes
    it finds (ResNet-18 has 17 ReLUs: the stem's and two in each of its 8 basic blocks) and outlines them."""
    graph = skriptnd.load(ROOT / "models" / "resnet18").compose()
    assert sum(op.op == "nn.relu" for op in graph.operations) == 17
    page = tmp_path / "resnet18.html"
    page.write_text(to_html(graph), encoding="utf-8")
    dom = _browse(page, tmp_path, "--dump-dom", fragment="#search=nn.relu").stdout
    assert re.search(r'<span id="count">17 matches</span>', dom), dom[:2000]
    assert len(re.findall(r'class="node op cat-tosa hit"', dom)) == 17
    red = _rgb("#d40000")
    _, _, plain = read_png(screenshot(page, tmp_path))
    _, _, searched = read_png(screenshot(page, tmp_path, "#search=nn.relu"))
    assert Counter(plain)[red] == 0 and Counter(searched)[red] > 200  # the found boxes' red outline
