//! Collection inside the capture range only (`--collect range`). torch.profiler (Kineto)
//! enables its CUPTI activity kinds when `profile()` starts, after the program has loaded
//! its CUDA modules; with CUPTI on from initialisation the same short kernels measure a tick
//! longer (docs/decisions/2026-11-22-recorder-collect-late.md). Here the injection library subscribes to the
//! profiler start/stop API calls and switches its kinds on when a start call returns and off
//! when a stop call begins, writing a [`tag::COLLECT`] mark with CUPTI's clock each time so
//! assembly keeps exactly what ran while collection was on.

use std::ffi::c_void;
use std::sync::Mutex;

use crate::cupti_lib::CuptiLib;
use crate::layout::api_domain;
use crate::spool::{FrameBuf, tag};

/// `CUpti_ApiCallbackSite`: the callback runs as the API function starts or returns.
const SITE_ENTER: u32 = 0;
const SITE_EXIT: u32 = 1;

/// Callback ids are small integers; CUDA 13.0 has fewer than 1000 per domain.
const MAX_CBID: u32 = 4096;

/// Whether an API function name (as `cuptiGetCallbackName` gives it, possibly with a
/// `_vNNNN` suffix) starts a profiler range.
pub fn is_profiler_start(name: &str) -> bool {
    name.starts_with("cudaProfilerStart") || name.starts_with("cuProfilerStart")
}

/// Whether an API function name stops a profiler range.
pub fn is_profiler_stop(name: &str) -> bool {
    name.starts_with("cudaProfilerStop") || name.starts_with("cuProfilerStop")
}

/// An API function as CUPTI's callback API names it: (domain, cbid).
pub type ApiId = (u32, u32);

/// The ids of every profiler start and stop function this CUPTI knows, found by name so no
/// callback id of one CUDA release is built in.
pub fn profiler_callbacks(cupti: &CuptiLib) -> (Vec<ApiId>, Vec<ApiId>) {
    let (mut start, mut stop) = (Vec::new(), Vec::new());
    for domain in [api_domain(false), api_domain(true)] {
        for cbid in 1..MAX_CBID {
            let Some(n) = cupti.callback_name(domain, cbid) else {
                continue;
            };
            let n = String::from_utf8_lossy(&n);
            if is_profiler_start(&n) {
                start.push((domain, cbid));
            } else if is_profiler_stop(&n) {
                stop.push((domain, cbid));
            }
        }
    }
    (start, stop)
}

/// What the callback needs: the library, the kinds it switches, and where marks go.
pub struct RangeCollector {
    pub kinds: Vec<u32>,
    pub start: Vec<ApiId>,
    pub stop: Vec<ApiId>,
    /// Collection is on. A runtime start call runs the driver's inside it, so the second
    /// start (and a stop with nothing on) changes nothing.
    on: Mutex<bool>,
}

/// A state change the callback asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    On,
    Off,
}

impl RangeCollector {
    pub fn new(kinds: Vec<u32>, start: Vec<ApiId>, stop: Vec<ApiId>) -> Self {
        Self {
            kinds,
            start,
            stop,
            on: Mutex::new(false),
        }
    }

    /// What one API callback asks for: on when a start call returns, off when a stop call
    /// begins (so the stop's own work is not recorded, as under Kineto).
    pub fn wanted(&self, domain: u32, cbid: u32, site: u32) -> Option<Switch> {
        if site == SITE_EXIT && self.start.contains(&(domain, cbid)) {
            Some(Switch::On)
        } else if site == SITE_ENTER && self.stop.contains(&(domain, cbid)) {
            Some(Switch::Off)
        } else {
            None
        }
    }

    /// Runs `f` with the change to `want` when collection is not already so, all under one
    /// lock, so a start and a stop on two threads cannot interleave their switching and marks.
    /// `f` returns whether the switch took effect; if not, the state stays as it was.
    pub fn switch_with(&self, want: Switch, f: impl FnOnce(Switch) -> bool) -> Option<Switch> {
        let mut on = match self.on.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if *on == (want == Switch::On) {
            return None;
        }
        if f(want) {
            *on = want == Switch::On;
            Some(want)
        } else {
            None
        }
    }

    /// Switches the kinds and returns the frames to write: the mark, then a note for each
    /// kind CUPTI refused.
    pub fn apply(&self, cupti: &CuptiLib, sw: Switch) -> FrameBuf {
        let mut fb = FrameBuf::default();
        // Marked before switching either way, so nothing recorded starts before an "on" mark
        // and nothing after an "off" mark was recorded.
        fb.collect_mark(sw == Switch::On, cupti.timestamp());
        for n in switch_kinds(cupti, &self.kinds, sw, " at the capture range") {
            fb.frame(tag::NOTE, n.as_bytes());
        }
        fb
    }
}

/// Enables (`On`) or disables (`Off`) each activity kind, returning a note for each one CUPTI
/// refused (`when` says at what point, for the note).
pub fn switch_kinds(cupti: &CuptiLib, kinds: &[u32], sw: Switch, when: &str) -> Vec<String> {
    let mut failed = Vec::new();
    for &k in kinds {
        // SAFETY: plain calls with an activity kind code.
        let r = unsafe {
            match sw {
                Switch::On => (cupti.enable)(k),
                Switch::Off => (cupti.disable)(k),
            }
        };
        if r != 0 {
            let verb = if sw == Switch::On {
                "Enable"
            } else {
                "Disable"
            };
            failed.push(format!(
                "cuptiActivity{verb}({k}){when}: {}",
                cupti.result_string(r)
            ));
        }
    }
    failed
}

/// Reads `CUpti_CallbackData::callbackSite`, the struct's first field.
///
/// # Safety
/// `cbdata` is the callback data CUPTI passed for an API-domain callback, or null.
pub unsafe fn callback_site(cbdata: *const c_void) -> Option<u32> {
    if cbdata.is_null() {
        return None;
    }
    // SAFETY: CUpti_CallbackData starts with the 32-bit callbackSite enum.
    Some(unsafe { (cbdata as *const u32).read_unaligned() })
}

/// Windows (start, end) on CUPTI's clock from the marks in spool order; an "on" with no
/// "off" runs to the end of the process.
pub fn windows_from_marks(marks: &[(bool, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut open: Option<u64> = None;
    for &(on, t) in marks {
        match (on, open) {
            (true, None) => open = Some(t),
            (false, Some(lo)) => {
                out.push((lo, t.max(lo)));
                open = None;
            }
            _ => {}
        }
    }
    if let Some(lo) = open {
        out.push((lo, u64::MAX));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_and_without_version_suffixes() {
        assert!(is_profiler_start("cudaProfilerStart_v4000"));
        assert!(is_profiler_start("cuProfilerStart"));
        assert!(is_profiler_stop("cudaProfilerStop_v4000"));
        assert!(!is_profiler_start("cudaProfilerInitialize_v4000"));
        assert!(!is_profiler_stop("cudaProfilerStart_v4000"));
    }

    #[test]
    fn runtime_start_wrapping_the_driver_start_switches_once() {
        let c = RangeCollector::new(vec![10], vec![(2, 151), (1, 300)], vec![(2, 152), (1, 301)]);
        let step = |domain, cbid, site| {
            c.wanted(domain, cbid, site)
                .and_then(|w| c.switch_with(w, |_| true))
        };
        // cudaProfilerStart enter, cuProfilerStart enter/exit, cudaProfilerStart exit.
        assert_eq!(step(2, 151, SITE_ENTER), None);
        assert_eq!(step(1, 300, SITE_ENTER), None);
        assert_eq!(step(1, 300, SITE_EXIT), Some(Switch::On));
        assert_eq!(step(2, 151, SITE_EXIT), None);
        // Unrelated calls change nothing.
        assert_eq!(step(2, 7, SITE_ENTER), None);
        // The stop switches off as it begins; its inner driver stop changes nothing.
        assert_eq!(step(2, 152, SITE_ENTER), Some(Switch::Off));
        assert_eq!(step(1, 301, SITE_ENTER), None);
        assert_eq!(step(2, 152, SITE_EXIT), None);
        // A stray stop, then a second range.
        assert_eq!(step(2, 152, SITE_ENTER), None);
        assert_eq!(step(2, 151, SITE_EXIT), Some(Switch::On));
    }

    #[test]
    fn a_switch_that_fails_leaves_the_state() {
        let c = RangeCollector::new(vec![10], vec![], vec![]);
        assert_eq!(c.switch_with(Switch::On, |_| false), None);
        // Still off: a stop changes nothing, a start is tried again.
        assert_eq!(c.switch_with(Switch::Off, |_| true), None);
        assert_eq!(c.switch_with(Switch::On, |_| true), Some(Switch::On));
    }

    #[test]
    fn marks_make_windows() {
        assert_eq!(windows_from_marks(&[]), vec![]);
        assert_eq!(
            windows_from_marks(&[(true, 10), (false, 20), (false, 25), (true, 30)]),
            vec![(10, 20), (30, u64::MAX)]
        );
        // A repeated "on" keeps the first.
        assert_eq!(
            windows_from_marks(&[(true, 10), (true, 12), (false, 20)]),
            vec![(10, 20)]
        );
    }

    #[test]
    fn callback_site_of_null_is_none() {
        // SAFETY: null is allowed.
        // SAFETY: a null pointer is the one input callback_site checks before reading.
        assert_eq!(unsafe { callback_site(std::ptr::null()) }, None);
        let data = [SITE_EXIT, 0, 0, 0];
        assert_eq!(
            // SAFETY: points at a u32.
            unsafe { callback_site(data.as_ptr() as *const c_void) },
            Some(SITE_EXIT)
        );
    }
}
