//! `--collect late` relies on the preloaded injection library taking the place of libcudart's
//! cudaProfilerStart/Stop even for a caller loaded privately (a Python extension is dlopened
//! with RTLD_LOCAL), and on forwarding to libcudart's own functions. Checked here with a
//! stand-in libcudart built by the system C compiler; no CUDA needed.
//!
//! Ignored by default because it needs a C compiler; `.ci/run` runs it with `--ignored`
//! (and fails when `cc` is missing there).

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::path::{Path, PathBuf};

use std::process::Command;

fn cc(args: &[&str]) -> bool {
    Command::new("cc")
        .args(args)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// The cdylib cargo built for this test run: `cargo test` leaves it in `deps/` next to the
/// test executable (only `cargo build` copies it beside the binaries).
fn injection_lib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().join("libgapscope_profiler.so")
}

#[test]
#[ignore = "needs a C compiler (cc); .ci/run runs it"]
fn preloaded_interposers_bind_for_a_private_caller_and_forward_to_libcudart() {
    assert!(
        Command::new("cc").arg("--version").output().is_ok(),
        "this test needs a C compiler: `cc` is not on PATH"
    );
    let inject = injection_lib();
    assert!(inject.is_file(), "{} not built", inject.display());
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap();
    let src = |name: &str, text: &str| {
        let p = d.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let cudart = src(
        "cudart.c",
        "int cudaProfilerStart(void) { return 42; }\nint cudaProfilerStop(void) { return 43; }\n",
    );
    let shim = src(
        "shim.c",
        "int cudaProfilerStart(void);\nint cudaProfilerStop(void);\nint shim(void) { return cudaProfilerStart() * 100 + cudaProfilerStop(); }\n",
    );
    let main = src(
        "main.c",
        "#include <dlfcn.h>\n#include <stdio.h>\nint main(int c, char** v) {\n  void* h = dlopen(v[1], RTLD_NOW | RTLD_LOCAL);\n  if (!h) { fprintf(stderr, \"%s\\n\", dlerror()); return 2; }\n  int (*f)(void) = (int (*)(void))dlsym(h, \"shim\");\n  printf(\"%d\\n\", f());\n  return 0;\n}\n",
    );
    let lib_cudart = format!("{dir}/libcudart.so.13");
    let lib_shim = format!("{dir}/libshim.so");
    let exe = format!("{dir}/main");
    assert!(cc(&[
        "-shared",
        "-fPIC",
        "-Wl,-soname,libcudart.so.13",
        "-o",
        &lib_cudart,
        &cudart
    ]));
    assert!(cc(&[
        "-shared",
        "-fPIC",
        "-o",
        &lib_shim,
        &shim,
        &lib_cudart,
        &format!("-Wl,-rpath,{dir}")
    ]));
    assert!(cc(&["-o", &exe, &main, "-ldl"]));
    let run = |preload: Option<&Path>| {
        let mut c = Command::new(&exe);
        c.arg(&lib_shim).env("LD_DEBUG", "bindings");
        if let Some(p) = preload {
            c.env("LD_PRELOAD", p);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        (
            String::from_utf8_lossy(&o.stdout).trim().to_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    // Without the preload the shim binds to the stand-in directly.
    let (out, _) = run(None);
    assert_eq!(out, "4243");
    // With it, both calls bind to the injection library, which forwards to the stand-in's
    // functions (same results) and, with no recorder settings in the environment, records
    // nothing.
    let (out, bindings) = run(Some(&inject));
    assert_eq!(out, "4243");
    for f in ["cudaProfilerStart", "cudaProfilerStop"] {
        assert!(
            bindings.lines().any(|l| l.contains("libshim.so")
                && l.contains("libgapscope_profiler.so")
                && l.contains(&format!("`{f}'"))),
            "{f} not bound to the injection library:\n{}",
            bindings
                .lines()
                .filter(|l| l.contains(f))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}
