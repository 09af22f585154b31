#!/usr/bin/env bash
# One call on the 2-GPU machine (nvidia-h200-x2): TP=2 decode (scripts/capture/tp-decode.py)
# balanced, with a planted host stall and with a planted GPU stall on rank 1, each traced per
# rank by torch.profiler and, again, recorded by gapscope-record (.device/gapscope-record and
# .device/libgapscope_profiler.so). Results: $OUT/tp.tar.xz (traces, recordings, truth JSON,
# logs) and a table of the truth printed last. Arguments are passed to tp-decode.py (`--graph`:
# each step replayed as one CUDA graph).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
# NVLink multicast stays off on these machines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
w=$(mktemp -d)/tp
mkdir -p "$w"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$w/device.txt"
STALL=${STALL_MS:-20}
run=(python3 -m torch.distributed.run --nproc_per_node 2 scripts/capture/tp-decode.py --stall-ms "$STALL" "$@")
for m in balanced host kernel; do
  "${run[@]}" --mode "$m" --out "$w" > "$w/$m.log" 2>&1
  echo "profiler $m: rc=$?"
done
for m in balanced host kernel; do
  .device/gapscope-record -o "$w/rec-$m.gst" -- "${run[@]}" --mode "$m" --out "$w" --no-profile \
    > "$w/rec-$m.log" 2>&1
  echo "recorder $m: rc=$?"
done
(cd "$(dirname "$w")" && tar cJf "$OUT/tp.tar.xz" tp)
ls -la "$OUT"
python3 - "$w" <<'PY'
import json, os, statistics, sys
w = sys.argv[1]
for f in sorted(os.listdir(w)):
    if not f.startswith("truth-"):
        continue
    t = json.load(open(os.path.join(w, f)))
    cells = []
    for r in t["ranks"]:
        st = r["steps"]
        gpu = [s.get("gpu_step_ms") for s in st if s.get("gpu_step_ms") is not None]
        host = [s["planted_host_ns"] / 1e6 for s in st if "planted_host_ns" in s]
        floor = r.get("allreduce_floor_us")
        spin = [s["planted_gpu_ms"] for s in st if "planted_gpu_ms" in s]
        cells.append(f"rank {r['rank']}: gpu step median {statistics.median(gpu) if gpu else 0:.3f} ms"
                     + (f", host stall {statistics.median(host):.3f} ms" if host else "")
                     + (f", gpu stall {statistics.median(spin):.3f} ms" if spin else "")
                     + (f", all-reduce together {floor:.2f} us" if floor else ""))
    print(f, "|", " | ".join(cells))
PY
