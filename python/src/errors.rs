//! The exceptions the package raises: `TraceError` and its subclasses, each carrying the
//! one-line message the CLI prints after `gapscope: error: `.

use gapscope_analyzer::AnalyzerError;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    gapscope,
    TraceError,
    PyException,
    "A trace, rules file or option gapscope cannot use; the message is the CLI's one line."
);
create_exception!(
    gapscope,
    TruncatedTraceError,
    TraceError,
    "The trace ends early; `allow_truncated=True` loads what it holds."
);
create_exception!(
    gapscope,
    LimitError,
    TraceError,
    "The input holds more events or steps than the limits allow (`max_events`, `max_steps`)."
);
create_exception!(
    gapscope,
    RulesError,
    TraceError,
    "A bucket rules file (or a step regex) that cannot be used."
);
create_exception!(
    gapscope,
    UsageError,
    TraceError,
    "Arguments the command line would refuse (an unknown option value, a missing input)."
);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("TraceError", py.get_type::<TraceError>())?;
    m.add("TruncatedTraceError", py.get_type::<TruncatedTraceError>())?;
    m.add("LimitError", py.get_type::<LimitError>())?;
    m.add("RulesError", py.get_type::<RulesError>())?;
    m.add("UsageError", py.get_type::<UsageError>())?;
    Ok(())
}

/// The analyzer's error as the exception of its kind, with the CLI's one-line message.
pub fn analyzer(e: &AnalyzerError) -> PyErr {
    let line = one_line(&e.to_string());
    match e {
        AnalyzerError::Truncated { .. } => TruncatedTraceError::new_err(line),
        AnalyzerError::Limit { .. } => LimitError::new_err(line),
        AnalyzerError::Rules { .. } => RulesError::new_err(line),
        AnalyzerError::Invalid(_) => UsageError::new_err(line),
        _ => TraceError::new_err(line),
    }
}

/// An import's error, ending as the CLI's does with the hint to `--allow-truncated`
/// (`allow_truncated=True`) when the input was cut short and the option was not given.
pub fn import(e: &AnalyzerError, allow_truncated: bool) -> PyErr {
    match e {
        AnalyzerError::Truncated { .. } if !allow_truncated => {
            TruncatedTraceError::new_err(format!(
                "{} {}",
                one_line(&e.to_string()),
                gapscope_cli::TRUNCATION_HINT
            ))
        }
        _ => analyzer(e),
    }
}

/// What the CLI prints: one line, control characters escaped.
pub fn one_line(s: &str) -> String {
    gapscope_cli::render::text(&s.replace(['\n', '\r'], " "))
}

/// Runs `f`, turning a panic (a bug in gapscope, never the input's fault) into a
/// `TraceError` that names the input, so that no input can take the interpreter down with
/// PyO3's `PanicException`.
pub fn no_panic<T>(label: &str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(TraceError::new_err(panic_line(label, &p))),
    }
}

/// A panic's message as one error line.
pub fn panic_line(label: &str, p: &(dyn std::any::Any + Send)) -> String {
    let what = p
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned());
    one_line(&format!(
        "{label}: internal error (a gapscope bug; please report it with the input): {what}"
    ))
}
