//! How much an import may load. A 15 MB gzip can hold tens of millions of tiny events, and
//! every kept event costs a table row (a kernel row is 116 bytes), so converted formats stop
//! at a documented, overridable number of events instead of running the machine out of
//! memory. Distinct names are bounded too, in proportion.

use std::path::{Path, PathBuf};

use gapscope_traces::StringTable;

use crate::error::{AnalyzerError, Result};

/// Events (kernel, memop, launch, marker, sample and host-scope rows together) an import
/// loads at most unless [`super::ImportOptions::max_events`] says otherwise, whatever the
/// format: at this limit `report`, `diff`, `gate` and the explorer stay under 1 GB of
/// memory (docs/BENCHMARKS.md#memory).
pub const DEFAULT_MAX_EVENTS: u64 = 3_000_000;

/// Bytes of distinct name text allowed per allowed event (160 MB at the default limit).
/// Real traces hold a few thousand distinct names of at most a few KiB each.
pub const NAME_BYTES_PER_EVENT: u64 = 32;

/// Counts what an import keeps and refuses the input once a limit is passed.
pub(crate) struct Budget {
    path: PathBuf,
    max_events: Option<u64>,
    max_name_bytes: Option<u64>,
    events: u64,
}

impl Budget {
    /// `max_events`: `None` for no limit.
    pub(crate) fn new(path: &Path, max_events: Option<u64>) -> Self {
        Self {
            path: path.to_owned(),
            max_events,
            max_name_bytes: max_events.map(|n| n.saturating_mul(NAME_BYTES_PER_EVENT)),
            events: 0,
        }
    }

    /// Counts one kept event.
    pub(crate) fn event(&mut self) -> Result<()> {
        self.events += 1;
        match self.max_events {
            Some(max) if self.events > max => Err(AnalyzerError::limit(
                &self.path,
                format!(
                    "holds more than {max} events; refusing to load it (about 120 bytes of memory per event; raise --max-events to read a trace this large)"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Checks the distinct names interned so far.
    pub(crate) fn names(&self, strings: &StringTable) -> Result<()> {
        match self.max_name_bytes {
            Some(max) if strings.bytes() as u64 > max => Err(AnalyzerError::limit(
                &self.path,
                format!(
                    "its distinct names take more than {} KiB ({} bytes per allowed event); refusing to load it (raise --max-events to allow more)",
                    max >> 10,
                    NAME_BYTES_PER_EVENT
                ),
            )),
            _ => Ok(()),
        }
    }
}
