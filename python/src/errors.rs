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

/// What the CLI prints: one line, control characters escaped.
pub fn one_line(s: &str) -> String {
    gapscope_cli::render::text(&s.replace(['\n', '\r'], " "))
}
