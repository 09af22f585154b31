#!/usr/bin/env bash
# Syntax-check the engine's CUDA kernels with clang (no CUDA toolkit needed). Each module is
# checked the way the registry hands it to NVRTC: common.cuh prepended. A developer tool for
# machines without nvcc; the real compile is NVRTC's on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG=${CLANG:-$(command -v clang || command -v clang-14 || true)}
if [ -z "$CLANG" ]; then
  echo "check-cuda-syntax: no clang found (apt-get install clang-14)" >&2
  exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for cu in kernels/cuda/*.cu; do
  cat scripts/cuda-syntax/nvrtc_shim.h kernels/cuda/common.cuh "$cu" > "$tmp/$(basename "$cu")"
  if ! "$CLANG" -x cuda --cuda-device-only --cuda-gpu-arch=sm_80 -nocudainc -nocudalib \
      -fsyntax-only -Wall -Wno-unknown-cuda-version "$tmp/$(basename "$cu")"; then
    status=1
  fi
done
[ $status -eq 0 ] && echo "check-cuda-syntax: $(ls kernels/cuda/*.cu | wc -l) modules OK"
exit $status
