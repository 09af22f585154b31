//! The capture windows: which stretches of CUPTI time a recording keeps.

use std::path::Path;

use super::{AssembleSettings, Facts};
use crate::collect_range::{is_profiler_start, is_profiler_stop, windows_from_marks};
use crate::decode::{self, Activity};
use crate::error::Result;
use crate::inject::Collect;
use crate::layout::api_domain;
use crate::spool::{SpoolReader, tag};

/// The windows of CUPTI time to keep: what collection followed (`--collect range|late`), the
/// program's cudaProfilerStart/Stop ranges, then `--delay`/`--duration` (empty: keep all).
pub(super) fn capture_windows(
    spool: &Path,
    facts: &Facts,
    s: &AssembleSettings,
    offset: Option<i64>,
    notes: &mut Vec<String>,
) -> Result<Vec<(u64, u64)>> {
    let mut windows: Vec<(u64, u64)> = Vec::new();
    if !facts.collect_marks.is_empty() {
        // Collection itself followed the range: keep exactly what it was on for.
        windows = windows_from_marks(&facts.collect_marks);
    } else if s.capture.profiler_api {
        windows = pass_profiler_windows(spool, facts)?;
        let late = facts
            .header
            .as_ref()
            .is_some_and(|h| Collect::from_name(&h.collect) == Some(Collect::Late));
        if late {
            notes.push("--collect late: no cudaProfilerStart reached the interposer (the program never called it, or called it through a static libcudart or the driver's cuProfilerStart), so nothing was recorded; --collect range works for those".into());
        } else if windows.is_empty() {
            notes.push("capture range cudaProfilerApi: the program never called cudaProfilerStart, so nothing was kept".into());
        }
    }
    if s.capture.delay_ns.is_some() || s.capture.duration_ns.is_some() {
        match offset {
            Some(off) => {
                let lo =
                    (s.launch_realtime_ns + off + s.capture.delay_ns.unwrap_or(0)).max(0) as u64;
                let hi = s
                    .capture
                    .duration_ns
                    .map(|d| lo.saturating_add(d.max(0) as u64))
                    .unwrap_or(u64::MAX);
                if s.capture.profiler_api {
                    windows = windows
                        .into_iter()
                        .map(|(a, b)| (a.max(lo), b.min(hi)))
                        .filter(|(a, b)| a < b)
                        .collect();
                } else {
                    windows = vec![(lo, hi)];
                }
            }
            None => {
                notes.push("--delay/--duration ignored: the spool has no clock calibration".into())
            }
        }
    }
    Ok(windows)
}

/// Windows from cudaProfilerStart/Stop pairs: from the end of each start call to the
/// beginning of the following stop call; a start with no stop runs to the end.
fn pass_profiler_windows(path: &Path, facts: &Facts) -> Result<Vec<(u64, u64)>> {
    let mut calls: Vec<(u64, u64, bool)> = Vec::new();
    let mut r = SpoolReader::open(path)?;
    while let Some(fr) = r.next_frame()? {
        if fr.tag != tag::RECORD {
            continue;
        }
        if let Ok(Activity::Api(a)) = decode::decode(&fr.payload)
            && let Some(n) = facts.api_names.get(&(api_domain(a.runtime), a.cbid))
        {
            if is_profiler_start(n) {
                calls.push((a.start, a.end, true));
            } else if is_profiler_stop(n) {
                calls.push((a.start, a.end, false));
            }
        }
    }
    calls.sort_unstable();
    let mut windows = Vec::new();
    let mut open: Option<u64> = None;
    for (s, e, is_start) in calls {
        match (is_start, open) {
            (true, None) => open = Some(e),
            (false, Some(lo)) => {
                windows.push((lo, s));
                open = None;
            }
            _ => {} // a nested start or a stray stop changes nothing
        }
    }
    if let Some(lo) = open {
        windows.push((lo, u64::MAX));
    }
    Ok(windows)
}
