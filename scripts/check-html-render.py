#!/usr/bin/env python3
"""Renders an HTML report in headless Chromium and checks that it drew.

    python3 scripts/check-html-render.py FILE.html OUT.png [--width 1400] [--height 2000]

Chromium (Debian's /usr/bin/chromium, else `chromium` or `chromium-browser` on PATH, or the
CHROMIUM environment variable) takes a screenshot of FILE.html into OUT.png with a fresh
profile and nothing that reaches the network. The check then fails (exit 1, one line on
stderr) when:

- Chromium fails, or writes no PNG;
- the PNG is not WIDTH x HEIGHT pixels;
- the picture is blank: fewer than 16 distinct colours, or under 1% of the pixels differ
  from the most common colour (decoded here: zlib and the PNG row filters, standard
  library only);
- Chromium's log shows a console message, an uncaught error, a load that failed or a
  request the page's content security policy refused.

Standard library only. `.ci/run` runs it on the README trace's `report --html`.
"""

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

MIN_COLOURS = 16
MIN_INK = 0.01
# Chromium log lines that mean the page itself went wrong.
PAGE_PROBLEMS = ("CONSOLE", "Uncaught", "Failed to load", "Refused to", "net::ERR_")


def fail(msg):
    print(f"check-html-render: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def chromium():
    candidates = [os.environ.get("CHROMIUM"), "/usr/bin/chromium"]
    candidates += [shutil.which(n) for n in ("chromium", "chromium-browser")]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    fail("no Chromium found (apt-get install chromium, or set CHROMIUM)")


def screenshot(browser, html, png, width, height):
    """Runs Chromium; returns its log (stderr and stdout)."""
    profile = tempfile.mkdtemp(prefix="gapscope-chromium-")
    args = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        f"--window-size={width},{height}",
        f"--screenshot={png}",
        "file://" + os.path.abspath(html),
    ]
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=180,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        fail("Chromium did not finish within 180 s")
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    log = p.stderr + p.stdout
    if p.returncode != 0:
        last = [l for l in log.splitlines() if l.strip()][-1:] or ["no output"]
        fail(f"Chromium exited with {p.returncode}: {last[0][:300]}")
    return log


def chunks(data):
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail("the screenshot is not a PNG file")
    at = 8
    while at + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        yield kind, data[at + 8:at + 8 + n]
        at += 12 + n


def unfilter(raw, width, height, bpp):
    """The PNG rows with their filters undone (bit depth 8), as a list of bytes."""
    stride = width * bpp
    prev = bytearray(stride)
    rows = []
    at = 0
    for _ in range(height):
        ftype = raw[at]
        line = bytearray(raw[at + 1:at + 1 + stride])
        at += 1 + stride
        if ftype == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif ftype == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev))
        elif ftype == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        elif ftype != 0:
            fail(f"PNG row filter {ftype} is not one PNG defines")
        rows.append(bytes(line))
        prev = line
    return rows


def check_png(png, width, height):
    """(width, height, distinct colours, share of the most common colour)."""
    try:
        with open(png, "rb") as f:
            data = f.read()
    except OSError as e:
        fail(f"no screenshot: {e}")
    ihdr, idat = None, []
    for kind, body in chunks(data):
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
    if ihdr is None:
        fail("the PNG has no header chunk")
    w, h, depth, colour_type, _, _, interlace = ihdr
    if (w, h) != (width, height):
        fail(f"the screenshot is {w}x{h}, not {width}x{height}")
    bpp = {2: 3, 6: 4}.get(colour_type)
    if depth != 8 or bpp is None or interlace != 0:
        fail(f"unexpected PNG format (depth {depth}, colour type {colour_type}, "
             f"interlace {interlace})")
    try:
        raw = zlib.decompress(b"".join(idat))
    except zlib.error as e:
        fail(f"the PNG's pixels do not decompress: {e}")
    if len(raw) < h * (1 + w * bpp):
        fail("the PNG's pixel data is short")
    counts = {}
    for row in unfilter(raw, w, h, bpp):
        for i in range(0, len(row), bpp):
            px = row[i:i + 3]
            counts[px] = counts.get(px, 0) + 1
    top = max(counts.values())
    return len(counts), top / (w * h)


def page_problems(log, html):
    """Log lines about the page: console output, errors, failed or refused loads."""
    name = os.path.basename(html)
    found = []
    for line in log.splitlines():
        if any(p in line for p in PAGE_PROBLEMS):
            # Chromium's own start-up noise names no page; keep what names ours or none.
            if "file://" in line and name not in line:
                continue
            found.append(line.strip())
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("html")
    ap.add_argument("png")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=2000)
    a = ap.parse_args()
    if not os.path.isfile(a.html):
        fail(f"{a.html}: no such file")
    t0 = time.monotonic()
    if os.path.exists(a.png):
        os.remove(a.png)
    log = screenshot(chromium(), a.html, a.png, a.width, a.height)
    t1 = time.monotonic()
    problems = page_problems(log, a.html)
    if problems:
        fail(f"Chromium reported a problem with the page: {problems[0][:300]}")
    colours, top = check_png(a.png, a.width, a.height)
    if colours < MIN_COLOURS:
        fail(f"the screenshot is blank: {colours} distinct colours (want {MIN_COLOURS})")
    if 1.0 - top < MIN_INK:
        fail(f"the screenshot is blank: {100 * top:.2f}% of it is one colour")
    print(f"check-html-render: ok: {a.png} {a.width}x{a.height}, {colours} colours, "
          f"{100 * (1 - top):.1f}% drawn; Chromium {t1 - t0:.1f} s, "
          f"check {time.monotonic() - t1:.1f} s")


if __name__ == "__main__":
    main()
