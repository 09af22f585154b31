#!/usr/bin/env python3
"""Writes the large hostile inputs used to measure gapscope's peak memory (issue 18, point 7).

They are too large to commit; the small ones live in the tests (cli/tests/hostile_input.rs,
analyzer/tests/*_import.rs, traces/tests/hostile_native.rs). Each file is built streaming,
so this script itself stays small in memory. Measure with, for example:

    python3 scripts/hostile/make-hostile-inputs.py /var/tmp/hostile
    for f in /var/tmp/hostile/*; do
        /usr/bin/time -v target/release/gapscope report -q "$f" >/dev/null 2>/tmp/err
        grep -E 'Maximum resident|Elapsed' /tmp/err; tail -1 /tmp/err
    done

Usage: python3 scripts/hostile/make-hostile-inputs.py OUT_DIR [--small]
(--small divides every size by 64, for a quick check of the script itself). stdlib only.
"""

import gzip
import os
import sqlite3
import sys

GIB = 1 << 30
KERNEL = b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1}'


def gz(path, parts, level=6):
    """Writes the concatenation of the byte strings `parts` yields, gzipped."""
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=level) as f:
        for p in parts:
            f.write(p)


def repeat(chunk, total):
    """`total` bytes made of `chunk` repeated (the last one cut)."""
    left = total
    while left > 0:
        n = min(left, len(chunk))
        yield chunk[:n]
        left -= n


def spaces_between_events(scale):
    # 4 GiB of spaces between two events (the audit's 4.1 GB RSS case).
    yield b'{"traceEvents":[' + KERNEL + b","
    yield from repeat(b" " * (16 << 20), 4 * GIB // scale)
    yield KERNEL + b"]}"


def many_events(scale, n=39_000_000):
    # 39M kept events in a small gzip (the audit's 14.6 MB / 5.8 GB case).
    n //= scale
    yield b'{"traceEvents":['
    batch = 100_000
    chunk = b",".join([KERNEL] * batch)
    done = 0
    while done < n:
        k = min(batch, n - done)
        yield (chunk if k == batch else b",".join([KERNEL] * k))
        done += k
        yield b"," if done < n else b""
    yield b"]}"


def events_under_the_limit(scale, n=4_900_000):
    # Just under the default limit of 5,000,000 events: imported and analysed.
    yield from many_events(scale, n)


def spaces_inside_an_event(scale):
    # Whitespace inside one event: a single value that must not be buffered whole.
    yield b'{"traceEvents":[{"ph":"X","cat":"kernel","name":"k",'
    yield from repeat(b" " * (16 << 20), 4 * GIB // scale)
    yield b'"ts":1,"dur":1}]}'


def huge_unread_value(scale):
    # A 4 GiB top-level string gapscope does not read (like Perfetto's systemTraceEvents).
    yield b'{"systemTraceEvents":"'
    yield from repeat(b"x" * (16 << 20), 4 * GIB // scale)
    yield b'","traceEvents":[' + KERNEL + b"]}"


def distinct_long_names(scale, n=2_000_000):
    # Every event names a different 1 KiB kernel: 2 GB of names from a small gzip.
    n //= scale
    yield b'{"traceEvents":['
    pad = "n" * 1000
    for i in range(n):
        sep = "," if i + 1 < n else ""
        yield (
            '{"ph":"X","cat":"kernel","name":"%s%d","ts":%d,"dur":1}%s' % (pad, i, i, sep)
        ).encode()
    yield b"]}"


def recursive_view(path):
    # A tiny nsys-like export whose kernel "table" is a view over an endless recursive CTE.
    if os.path.exists(path):
        os.remove(path)
    c = sqlite3.connect(path)
    c.executescript(
        """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO StringIds VALUES (1, 'k');
        CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS
          WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n)
          SELECT x AS start, x + 1 AS end, 0 AS deviceId, 0 AS contextId, 7 AS streamId,
                 x AS correlationId, 1 AS demangledName, 1 AS shortName FROM n;
        """
    )
    c.commit()
    c.close()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    scale = 64 if "--small" in sys.argv[2:] else 1
    os.makedirs(out, exist_ok=True)
    jobs = [
        ("spaces-between-events.json.gz", spaces_between_events(scale), 6),
        ("39m-events.json.gz", many_events(scale), 9),
        ("4.9m-events.json.gz", events_under_the_limit(scale), 9),
        ("spaces-inside-an-event.json.gz", spaces_inside_an_event(scale), 6),
        ("huge-unread-value.json.gz", huge_unread_value(scale), 6),
        ("distinct-long-names.json.gz", distinct_long_names(scale), 9),
    ]
    for name, parts, level in jobs:
        path = os.path.join(out, name)
        gz(path, parts, level)
        print(f"{path}: {os.path.getsize(path)} bytes")
    path = os.path.join(out, "recursive-view.sqlite")
    recursive_view(path)
    print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
