#!/usr/bin/env python3
"""Dependency-direction check (docs/ARCHITECTURE.md, "Invariants").

Fails when a workspace crate depends on a workspace crate it may not, when analyzer or gui
reach cudarc, when profiler reaches engine, when a device-side package's normal
dependency tree contains polars, egui, eframe, sqlx or tokio, when analyzer, gui or traces
reach sqlx or tokio (the run history's driver and runtime), or when an analysis library
(analyzer, traces) pulls in a presentation or command-line crate (plotters, clap, indicatif,
egui, eframe), when anything but gapscope-gui pulls in windowing crates, or when the GUI
pulls in command-line or chart crates, or when a library target pulls in a crate only
binaries may use (clap, anyhow, tracing-subscriber, indicatif). Each finding that comes from
the dependency tree names the shortest path to the offender.
"""
import json
import subprocess
import sys
from collections import deque
from functools import lru_cache

ALLOWED = {
    "gapscope-traces": set(),
    "gapscope-kernels": set(),
    "gapscope-engine": {"gapscope-traces", "gapscope-kernels", "gapscope-numerics"},
    "gapscope-profiler": {"gapscope-traces"},
    "gapscope-analyzer": {"gapscope-traces"},
    # Logits and hidden-state dumps compared: no traces, no analyzer.
    "gapscope-numerics": set(),
    "gapscope-history": {"gapscope-analyzer", "gapscope-traces"},
    "gapscope-gui": {"gapscope-analyzer", "gapscope-traces"},
    "gapscope-cli": None,  # may depend on everything
    # The Python module: the analyzer's tables and reports over Arrow, and the command line.
    "gapscope-python": {"gapscope-cli", "gapscope-analyzer", "gapscope-traces"},
    "gapscope-tests": None,
}
NO_CUDARC = ["gapscope-analyzer", "gapscope-gui", "gapscope-traces"]
DEVICE_SIDE = [
    "gapscope-engine",
    "gapscope-profiler",
    "gapscope-traces",
    "gapscope-kernels",
    "gapscope-numerics",
]
HEAVY = {"polars", "egui", "eframe", "sqlx", "tokio"}
# A database driver and an async runtime belong to the run history (gapscope-history) and the
# CLI: the analysis library, and so the explorer, carry neither (nsys exports are read with
# rusqlite, synchronously).
NO_DATABASE_DRIVER = ["gapscope-analyzer", "gapscope-gui", "gapscope-traces"]
DATABASE_DRIVER = {"sqlx", "tokio"}
# Analysis libraries hold decisions, not drawing or command lines: every front end (CLI, GUI)
# draws the same typed reports.
ANALYSIS_LIBS = ["gapscope-analyzer", "gapscope-traces", "gapscope-numerics"]
PRESENTATION = {"plotters", "clap", "indicatif", "egui", "eframe"}
# Windowing lives in the explorer binary alone: `gapscope gui` starts it as a process, so the
# CLI (and everything else) runs on machines without a display and builds without it.
GUI_ONLY = {"egui", "eframe", "winit", "glutin", "egui_glow"}
# The explorer draws the analyzer's reports; it takes no command-line or chart crate.
GUI_FORBIDDEN = {"clap", "indicatif", "plotters"}
# Command-line parsing, error reporting for a process and log set-up belong to binaries: a
# library target (built with its default features off, so a `cli` feature that only the
# `[[bin]]` requires does not count) takes typed settings and returns typed errors.
BIN_ONLY = {"clap", "anyhow", "tracing-subscriber", "indicatif"}
# Front ends whose library is a program: gapscope-cli's library is the `gapscope` command
# (its binary and the Python module's command both run it), gapscope-python the module.
FRONT_ENDS = {"gapscope-cli", "gapscope-python"}


@lru_cache(maxsize=None)
def graph(pkg, no_default_features=False):
    """The normal-dependency graph of `pkg` as {crate: set(children)}, from `cargo tree`."""
    cmd = ["cargo", "tree", "-e", "normal", "-p", pkg, "--prefix", "depth"]
    if no_default_features:
        cmd.append("--no-default-features")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    edges, stack = {}, []
    for line in out.splitlines():
        line = line.strip()
        if not line:
            continue
        digits = len(line) - len(line.lstrip("0123456789"))
        depth, name = int(line[:digits]), line[digits:].split()[0]
        del stack[depth:]
        edges.setdefault(name, set())
        if stack:
            edges[stack[-1]].add(name)
        stack.append(name)
    return edges


def tree(pkg, no_default_features=False):
    return set(graph(pkg, no_default_features))


def path_to(pkg, target, no_default_features=False):
    """The shortest dependency chain from `pkg` to `target` (rerun's get_dependency_path)."""
    edges = graph(pkg, no_default_features)
    prev, queue = {pkg: None}, deque([pkg])
    while queue:
        node = queue.popleft()
        if node == target:
            chain = []
            while node is not None:
                chain.append(node)
                node = prev[node]
            return " -> ".join(reversed(chain))
        for child in sorted(edges.get(node, ())):
            if child not in prev:
                prev[child] = node
                queue.append(child)
    return f"{pkg} -> ... -> {target}"


def offenders(pkg, forbidden, no_default_features=False):
    """The shortest path to each forbidden crate in `pkg`'s tree, one line each."""
    found = sorted(forbidden & tree(pkg, no_default_features))
    return [path_to(pkg, c, no_default_features) for c in found]


def main():
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        check=True, capture_output=True, text=True).stdout)
    errors = []
    names = {p["name"] for p in meta["packages"]}
    for p in meta["packages"]:
        name = p["name"]
        if name not in ALLOWED:
            errors.append(f"{name}: unknown workspace package; add it to scripts/check-deps.py and ARCHITECTURE.md")
            continue
        allowed = ALLOWED[name]
        for d in p["dependencies"]:
            if d["name"] in names and d.get("kind") in (None, "normal", "build"):
                if allowed is not None and d["name"] not in allowed:
                    errors.append(f"{name} may not depend on {d['name']}")
    for pkg in NO_CUDARC:
        for path in offenders(pkg, {"cudarc"}):
            errors.append(f"{pkg} must not depend on cudarc: {path}")
    for path in offenders("gapscope-profiler", {"gapscope-engine"}):
        errors.append(f"gapscope-profiler must not depend on gapscope-engine: {path}")
    for pkg in ANALYSIS_LIBS:
        for path in offenders(pkg, PRESENTATION):
            errors.append(f"{pkg} (analysis library) pulls in a presentation crate: {path}")
    for pkg in sorted(names - {"gapscope-gui"}):
        for path in offenders(pkg, GUI_ONLY):
            errors.append(f"{pkg} pulls in windowing, which belongs to gapscope-gui alone: {path}")
    if "gapscope-gui" in names:
        for path in offenders("gapscope-gui", GUI_FORBIDDEN):
            errors.append(f"gapscope-gui draws the analyzer's reports, nothing more: {path}")
    for pkg in NO_DATABASE_DRIVER:
        for path in offenders(pkg, DATABASE_DRIVER):
            errors.append(f"{pkg} must not pull in a database driver or async runtime (they belong to gapscope-history): {path}")
    for pkg in DEVICE_SIDE:
        for path in offenders(pkg, HEAVY):
            errors.append(f"{pkg} (device side) pulls in {path}")
    libs = [p["name"] for p in meta["packages"]
            if any("lib" in t["kind"] or "rlib" in t["kind"] for t in p["targets"])]
    for pkg in sorted(set(libs) - FRONT_ENDS):
        for path in offenders(pkg, BIN_ONLY, no_default_features=True):
            errors.append(f"{pkg}'s library pulls in a binary-only crate: {path}")
    for e in errors:
        print(f"dependency check: {e}", file=sys.stderr)
    if errors:
        return 1
    print(f"dependency check: ok ({len(meta['packages'])} workspace packages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
