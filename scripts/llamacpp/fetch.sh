#!/usr/bin/env bash
# Fetches llama.cpp's source and trims it to what a CUDA build of llama-batched-bench,
# llama-speculative-simple and the GGUF writer (gguf-py) need, as DEST (default .device/llamacpp-src.tar.xz): 23 MB unpacked,
# about 3 MB packed, which leaves room in the GPU machine's 64 MiB carry limit. Runs here
# (needs network for PyPI, no GPU).
#
# The ggml-org/llama.cpp repository is too large to fetch; the PyPI source distribution of
# llama-cpp-python vendors a recent llama.cpp (see ../shared/LLAMACPP.md). Its commit is
# written to DEST/COMMIT. llama.cpp is MIT-licensed (DEST/LICENSE); nothing of it is committed
# to this repository.
#
# usage: scripts/llamacpp/fetch.sh [DEST.tar.xz]
set -euo pipefail
VERSION=0.3.36
tarball=$(realpath -m "${1:-.device/llamacpp-src.tar.xz}")
work=$(mktemp -d)
dest="$work/llamacpp-src"
trap 'rm -rf "$work"' EXIT

python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q scikit-build-core cmake ninja
# pip prepares the sdist's metadata while downloading it, which needs CMake on PATH.
PATH="$work/venv/bin:$PATH" "$work/venv/bin/pip" download -q --no-deps --no-binary :all: \
    --no-build-isolation "llama-cpp-python==$VERSION" -d "$work"
tar xzf "$work/llama_cpp_python-$VERSION.tar.gz" -C "$work"
src="$work/llama_cpp_python-$VERSION/vendor/llama.cpp"

rm -rf "$dest"
mkdir -p "$dest/ggml/src" "$dest/tools"
cp -r "$src"/{CMakeLists.txt,LICENSE,cmake,include,src,common,vendor,gguf-py} "$dest/"
cp -r "$src"/ggml/{CMakeLists.txt,cmake,include,.gitignore} "$dest/ggml/" 2>/dev/null || \
    cp -r "$src"/ggml/{CMakeLists.txt,cmake,include} "$dest/ggml/"
# ggml's core files and only the CPU and CUDA backends.
find "$src/ggml/src" -maxdepth 1 -type f -exec cp {} "$dest/ggml/src/" \;
cp -r "$src/ggml/src/ggml-cpu" "$src/ggml/src/ggml-cuda" "$dest/ggml/src/"
# Only the tools built on the GPU machine.
cp -r "$src/tools/batched-bench" "$dest/tools/"
cat > "$dest/tools/CMakeLists.txt" <<'CMAKE'
# Trimmed by gapscope's scripts/llamacpp/fetch.sh: only the tools its recordings use.
find_package(Threads REQUIRED)
llama_add_compile_flags()
add_subdirectory(batched-bench)
CMAKE
# Only the speculative example (llama-speculative-simple: a draft model proposes, the target
# verifies in one batch).
mkdir -p "$dest/examples"
cp -r "$src/examples/speculative-simple" "$dest/examples/"
cat > "$dest/examples/CMakeLists.txt" <<'CMAKE'
# Trimmed by gapscope's scripts/llamacpp/fetch.sh: only the examples its recordings use.
find_package(Threads REQUIRED)
llama_add_compile_flags()
add_subdirectory(speculative-simple)
CMAKE
# The top-level CMakeLists adds pocs/ beside examples/: an empty one.
mkdir -p "$dest/pocs"
echo "# Trimmed by gapscope's scripts/llamacpp/fetch.sh: no proofs of concept." > "$dest/pocs/CMakeLists.txt"
if [ -d "$src/.git" ] || [ -f "$src/.git" ]; then
    git -C "$src" rev-parse HEAD > "$dest/COMMIT"
else
    echo "unknown (llama-cpp-python $VERSION sdist)" > "$dest/COMMIT"
fi
echo "llama-cpp-python $VERSION" >> "$dest/COMMIT"
mkdir -p "$(dirname "$tarball")"
tar cJf "$tarball" -C "$work" llamacpp-src
echo "fetch: $(du -sh "$dest" | cut -f1) unpacked, $(du -h "$tarball" | cut -f1) in $tarball, llama.cpp $(head -1 "$dest/COMMIT")"
