#!/usr/bin/env python3
"""Compile gapscope's CUDA kernels on a machine without a GPU: NVRTC (the same text the engine
hands it: common.cuh, then the module) to PTX, then ptxas for sm_90 (or --arch), printing each
kernel's registers, spills and shared memory. With --keep DIR the PTX and cubins are kept, so two
source trees can be compared machine code for machine code (`--compare OTHER_ROOT` does it
per kernel: a refactor that leaves every .text section byte-identical changes nothing on the
GPU).

Needs the NVRTC and ptxas of CUDA 13 from pip, in a virtual environment:

  python3 -m venv /tmp/nv && /tmp/nv/bin/pip install 'nvidia-cuda-nvrtc==13.0.*' 'nvidia-cuda-nvcc==13.0.*'
  /tmp/nv/bin/python scripts/kernels/nvrtc-check.py [--root .] [--compare OLD_ROOT] [MODULE ...]

Exit status: 0 when everything compiles (and, with --compare, every kernel's code is the same),
1 otherwise, 2 when NVRTC or ptxas cannot be found.
"""
import argparse
import ctypes
import glob
import os
import subprocess
import sys
import tempfile


def find_cuda():
    """(libnvrtc path, ptxas path) from the pip packages next to this interpreter."""
    for site in sys.path:
        base = os.path.join(site, "nvidia", "cu13")
        lib = glob.glob(os.path.join(base, "lib", "libnvrtc.so.13*"))
        ptxas = os.path.join(base, "bin", "ptxas")
        if lib and os.path.isfile(ptxas):
            return sorted(lib)[0], ptxas
    return None, None


def compile_module(nvrtc, ptxas, root, module, arch, out_dir):
    """Returns (ok, report lines, cubin path)."""
    common = open(os.path.join(root, "kernels/cuda/common.cuh"), encoding="utf-8").read()
    src = common + "\n" + open(os.path.join(root, f"kernels/cuda/{module}.cu"), encoding="utf-8").read()
    prog = ctypes.c_void_p()
    if nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), f"{module}.cu".encode(), 0, None, None):
        return False, [f"{module}: nvrtcCreateProgram failed"], None
    opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17"]
    rc = nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    if rc:
        return False, [f"{module}: NVRTC failed", log.value.decode(errors="replace")], None
    nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetPTX(prog, ptx)
    ptx_path = os.path.join(out_dir, f"{module}.ptx")
    cubin = os.path.join(out_dir, f"{module}.cubin")
    with open(ptx_path, "wb") as f:
        f.write(ptx.value)
    r = subprocess.run([ptxas, f"-arch={arch}", "-v", ptx_path, "-o", cubin], capture_output=True, text=True)
    lines, cur = [], None
    for line in r.stderr.splitlines():
        if "Compiling entry" in line:
            cur = line.split("'")[1]
        elif cur and ("Used" in line or ("spill" in line and " 0 bytes spill stores, 0 bytes spill loads" not in line)):
            lines.append(f"  {cur}: {line.split('info    : ')[-1]}")
    if r.returncode:
        return False, [f"{module}: ptxas failed", r.stderr], None
    return True, [f"== {module}"] + lines, cubin


def text_sections(cubin):
    """{kernel: .text bytes} of a cubin (ELF), via readelf."""
    out = subprocess.run(["readelf", "-S", "-W", cubin], capture_output=True, text=True).stdout
    names = [w for line in out.splitlines() for w in line.split() if w.startswith(".text.")]
    return {n[len(".text."):]: subprocess.run(["readelf", "-x", n, cubin], capture_output=True).stdout
            for n in names}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("modules", nargs="*", help="module names (default: every kernels/cuda/*.cu)")
    p.add_argument("--root", default=".", help="repository root (default .)")
    p.add_argument("--compare", metavar="OTHER_ROOT", help="another tree whose machine code to compare")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--keep", metavar="DIR", help="keep each module's PTX and cubin in DIR "
                   "(read the SASS with cuobjdump -sass DIR/MODULE.cubin)")
    a = p.parse_args()
    lib, ptxas = find_cuda()
    if not lib:
        print("nvrtc-check.py: no CUDA 13 NVRTC/ptxas from pip in this interpreter's site-packages "
              "(pip install 'nvidia-cuda-nvrtc==13.0.*' 'nvidia-cuda-nvcc==13.0.*')", file=sys.stderr)
        return 2
    # NVRTC opens its builtins library by name at compile time: load it first, globally.
    for b in sorted(glob.glob(os.path.join(os.path.dirname(lib), "libnvrtc-builtins.so.13*"))):
        ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
        break
    nvrtc = ctypes.CDLL(lib)
    mods = a.modules or [os.path.basename(f)[:-3] for f in sorted(glob.glob(os.path.join(a.root, "kernels/cuda/*.cu")))]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for m in mods:
            here, other = a.keep or os.path.join(tmp, "a"), os.path.join(tmp, "b")
            os.makedirs(here, exist_ok=True)
            good, lines, cubin = compile_module(nvrtc, ptxas, a.root, m, a.arch, here)
            print("\n".join(lines))
            ok &= good
            if good and a.compare:
                os.makedirs(other, exist_ok=True)
                good_b, lines_b, cubin_b = compile_module(nvrtc, ptxas, a.compare, m, a.arch, other)
                if not good_b:
                    print("\n".join(lines_b))
                    ok = False
                    continue
                ta, tb = text_sections(cubin), text_sections(cubin_b)
                for k in sorted(set(ta) | set(tb)):
                    same = ta.get(k) == tb.get(k)
                    ok &= same
                    print(f"  {k}: {'same machine code' if same else 'DIFFERENT machine code'} as {a.compare}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
