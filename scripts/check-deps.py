#!/usr/bin/env python3
"""Dependency-direction check (docs/ARCHITECTURE.md, "Rules").

Fails when a workspace crate depends on a workspace crate it may not, when analyzer or gui
reach cudarc, when profiler reaches engine, when a device-side package's normal
dependency tree contains polars, egui, eframe, sqlx or tokio, or when an analysis library
(analyzer, traces) pulls in a presentation or command-line crate (plotters, clap, indicatif,
egui, eframe), when anything but gapscope-gui pulls in windowing crates, or when the GUI
pulls in command-line or chart crates.
"""
import json
import subprocess
import sys

ALLOWED = {
    "gapscope-traces": set(),
    "gapscope-kernels": set(),
    "gapscope-engine": {"gapscope-traces", "gapscope-kernels"},
    "gapscope-profiler": {"gapscope-traces"},
    "gapscope-analyzer": {"gapscope-traces"},
    "gapscope-gui": {"gapscope-analyzer", "gapscope-traces"},
    "gapscope-cli": None,  # may depend on everything
    "gapscope-tests": None,
}
NO_CUDARC = ["gapscope-analyzer", "gapscope-gui", "gapscope-traces"]
DEVICE_SIDE = ["gapscope-engine", "gapscope-profiler", "gapscope-traces", "gapscope-kernels"]
HEAVY = {"polars", "egui", "eframe", "sqlx", "tokio"}
# Analysis libraries hold decisions, not drawing or command lines: every front end (CLI, GUI)
# draws the same typed reports.
ANALYSIS_LIBS = ["gapscope-analyzer", "gapscope-traces"]
PRESENTATION = {"plotters", "clap", "indicatif", "egui", "eframe"}
# Windowing lives in the explorer binary alone: `gapscope gui` starts it as a process, so the
# CLI (and everything else) runs on machines without a display and builds without it.
GUI_ONLY = {"egui", "eframe", "winit", "glutin", "egui_glow"}
# The explorer draws the analyzer's reports; it takes no command-line or chart crate.
GUI_FORBIDDEN = {"clap", "indicatif", "plotters"}


def tree(pkg):
    out = subprocess.run(
        ["cargo", "tree", "-e", "normal", "-p", pkg, "--prefix", "none", "--no-dedupe"],
        check=True, capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


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
        if "cudarc" in tree(pkg):
            errors.append(f"{pkg} must not depend on cudarc")
    if "gapscope-engine" in tree("gapscope-profiler"):
        errors.append("gapscope-profiler must not depend on gapscope-engine")
    for pkg in ANALYSIS_LIBS:
        bad = PRESENTATION & tree(pkg)
        if bad:
            errors.append(f"{pkg} (analysis library) pulls in {', '.join(sorted(bad))}")
    for pkg in sorted(names - {"gapscope-gui"}):
        bad = GUI_ONLY & tree(pkg)
        if bad:
            errors.append(f"{pkg} pulls in {', '.join(sorted(bad))}: windowing belongs to gapscope-gui alone")
    if "gapscope-gui" in names:
        bad = GUI_FORBIDDEN & tree("gapscope-gui")
        if bad:
            errors.append(f"gapscope-gui pulls in {', '.join(sorted(bad))}: it draws the analyzer's reports, nothing more")
    for pkg in DEVICE_SIDE:
        bad = HEAVY & tree(pkg)
        if bad:
            errors.append(f"{pkg} (device side) pulls in {', '.join(sorted(bad))}")
    for e in errors:
        print(f"dependency check: {e}", file=sys.stderr)
    if errors:
        return 1
    print(f"dependency check: ok ({len(meta['packages'])} workspace packages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
