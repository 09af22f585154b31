//! The `gapscope` command line, run in-process: the same library the binary's `main` calls.

use pyo3::prelude::*;

use crate::errors;

/// Runs `gapscope ARGV...` and keeps its output: (exit code, stdout text, error line).
/// The GIL is released while it runs.
#[pyfunction]
pub fn run_command(py: Python<'_>, argv: Vec<String>) -> (u8, String, Option<String>) {
    let args = std::iter::once("gapscope".to_owned()).chain(argv);
    let o = py.detach(move || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            gapscope_cli::run_captured(args)
        }))
    });
    match o {
        Ok(o) => (o.code, o.output, o.error),
        Err(p) => (2, String::new(), Some(errors::panic_line("gapscope", &p))),
    }
}

/// The `gapscope` command itself (the console script): `argv` includes the program name;
/// output goes to stdout and errors to stderr, as from the binary. Returns the exit code.
#[pyfunction]
pub fn cli_main(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.detach(move || gapscope_cli::exit_status(gapscope_cli::main(argv)))
}
