#!/usr/bin/env python3
"""Writes scripts/record/layout_check.c from the offsets! tables in profiler/src/layout.rs, so
the C check prints exactly the fields the decoder reads (run from the repository root)."""
import re
import sys

src = open("profiler/src/layout.rs", encoding="utf-8").read()
tables = re.findall(r"offsets!\(\w+, (\w+) \{(.*?)\}\);", src, re.S)
if not tables:
    sys.exit("gen-layout-check.py: no offsets! tables found in profiler/src/layout.rs")
lines = []
for ty, body in tables:
    lines.append(f"    S({ty});")
    for field in re.findall(r"\w+ = (\w+),", body):
        lines.append(f"    F({ty}, {field});")
c = f"""/* Prints the sizes and field offsets of the CUPTI activity records gapscope-record decodes,
 * from the CUDA toolkit's own cupti_activity.h, for comparison with the offsets the Rust
 * decoder uses (`gapscope-record --print-layout`). Generated from profiler/src/layout.rs by
 * scripts/record/gen-layout-check.py; built and run on the GPU machine by run-gpu.sh. */
#include <stdio.h>
#include <stddef.h>
#include <cupti.h>
#define F(T, f) printf("%s.%s %zu\\n", #T, #f, offsetof(T, f))
#define S(T) printf("%s.size %zu\\n", #T, sizeof(T))
int main(void) {{
    uint32_t v = 0; cuptiGetVersion(&v); printf("cupti_api_version %u\\n", v);
    printf("CUPTI_API_VERSION %u\\n", (unsigned)CUPTI_API_VERSION);
{chr(10).join(lines)}
    return 0;
}}
"""
open("scripts/record/layout_check.c", "w", encoding="utf-8").write(c)
print(f"wrote scripts/record/layout_check.c: {len(tables)} records, {len(lines) - len(tables)} fields")
