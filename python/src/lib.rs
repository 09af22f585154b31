//! `gapscope._native`: the compiled half of the `gapscope` Python package. It holds no
//! analysis of its own: traces are opened by the analyzer's session exactly as the CLI opens
//! them, tables leave as Arrow through the C data interface without a copy, reports leave as
//! the CLI's own JSON, and the `gapscope` command is the CLI's library. The Python half
//! (`python/gapscope/`) turns these into typed objects.

mod arrow_export;
mod command;
mod errors;
mod progress;
mod trace;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<arrow_export::ArrowTable>()?;
    m.add_class::<trace::Trace>()?;
    m.add_function(wrap_pyfunction!(trace::open_trace, m)?)?;
    m.add_function(wrap_pyfunction!(command::run_command, m)?)?;
    m.add_function(wrap_pyfunction!(command::cli_main, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
