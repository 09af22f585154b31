//! Import progress reported to a Python object (`start(total)`, `advance(n)`, `finish()`),
//! at most ten times a second, the GIL taken only for the call.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use gapscope_analyzer::import::ImportProgress;
use pyo3::prelude::*;

const EVERY: Duration = Duration::from_millis(100);

pub struct PyProgress {
    target: Option<Py<PyAny>>,
    /// Bytes not reported yet, and when the last report went.
    pending: Mutex<(u64, Instant)>,
}

impl PyProgress {
    pub fn new(target: Option<Py<PyAny>>) -> Self {
        Self {
            target,
            pending: Mutex::new((0, Instant::now())),
        }
    }

    /// Calls `method` on the target; an exception there is printed and otherwise ignored,
    /// since a progress bar must never stop an import.
    fn call(&self, method: &str, arg: Option<u64>) {
        let Some(t) = &self.target else { return };
        Python::attach(|py| {
            let r = match arg {
                Some(a) => t.call_method1(py, method, (a,)),
                None => t.call_method0(py, method),
            };
            if let Err(e) = r {
                e.print(py);
            }
        });
    }

    fn take_pending(&self, force: bool) -> Option<u64> {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if p.0 == 0 || (!force && p.1.elapsed() < EVERY) {
            return None;
        }
        let n = p.0;
        *p = (0, Instant::now());
        Some(n)
    }
}

impl ImportProgress for PyProgress {
    fn start(&self, total_bytes: Option<u64>) {
        if let Some(t) = total_bytes {
            self.call("start", Some(t));
        }
    }

    fn advance(&self, bytes: u64) {
        if self.target.is_none() {
            return;
        }
        {
            let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            p.0 += bytes;
        }
        if let Some(n) = self.take_pending(false) {
            self.call("advance", Some(n));
        }
    }

    fn finish(&self) {
        if let Some(n) = self.take_pending(true) {
            self.call("advance", Some(n));
        }
        self.call("finish", None);
    }
}
