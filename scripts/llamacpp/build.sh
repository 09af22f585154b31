#!/usr/bin/env bash
# Builds llama-batched-bench with the CUDA backend for sm_90 (H100/H200). Runs on the GPU
# machine (CMake, nvcc and a C++ compiler there; about 5 minutes with 16 jobs).
#
# usage: scripts/llamacpp/build.sh SRC BUILD [TARGETS]   (SRC: the tree fetch.sh prepared;
#        TARGETS: default llama-batched-bench; llama-speculative-simple builds the examples)
set -euo pipefail
src=$1
build=$2
targets=${3:-llama-batched-bench}
examples=OFF
[[ " $targets " == *" llama-speculative-simple "* ]] && examples=ON
export PATH=/usr/local/cuda/bin:$PATH
command -v cmake >/dev/null || { echo "build: no cmake on this machine" >&2; exit 1; }
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=$examples -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_COMMON=ON \
    -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF > "$build.configure.log" 2>&1 \
    || { tail -30 "$build.configure.log" >&2; exit 1; }
# shellcheck disable=SC2086 # a list of targets
cmake --build "$build" -j "$(nproc)" --target $targets > "$build.build.log" 2>&1 \
    || { grep -E "error|Error" "$build.build.log" | head -30 >&2; tail -20 "$build.build.log" >&2; exit 1; }
for t in $targets; do ls -la "$build/bin/$t"; done
