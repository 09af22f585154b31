//! A speculative run's kernel time per decode step by bucket, split into the draft's part
//! (the step's window before its verify forward, or the draft forwards' own kernels where
//! the models overlap on streams of their own) and the verify's, with the part spent on
//! rejected candidates (the same proportions as the section's `rejected_ms_per_step`).

use serde::Serialize;

use super::{Cycle, KernelRole};
use crate::analysis::prepared::Prepared;
use crate::bucket::Bucket;
use gapscope_traces::Phase;

/// One bucket's kernel time per decode step by role, ms.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpecBucket {
    pub bucket: Bucket,
    pub draft_ms_per_step: f64,
    pub verify_ms_per_step: f64,
    /// Over the steps whose tokens are known; `None` when none is.
    pub rejected_ms_per_step: Option<f64>,
}

/// Per bucket with any kernel time in the decode steps (display order): the mean over the
/// decode cycles of the draft and verify windows' kernel time, and of the rejected share
/// over the cycles whose tokens are known (the last cycle, with no successor, is left out
/// as in the section).
pub fn split(
    p: &Prepared,
    device: u32,
    cycles: &[Cycle],
    roles: Option<&[KernelRole]>,
) -> Vec<SpecBucket> {
    let n = Bucket::ALL.len();
    let order = p.kernels_on(device);
    let k = &p.trace.kernels;
    let (mut draft, mut verify, mut rejected) = (vec![0i64; n], vec![0i64; n], vec![0f64; n]);
    let (mut steps, mut known) = (0usize, 0usize);
    let by_cycle: Option<Vec<Vec<(usize, bool)>>> = roles.map(|r| {
        let mut v = vec![Vec::new(); cycles.len()];
        for x in r {
            if let Some(c) = v.get_mut(x.cycle as usize) {
                c.push((x.kernel as usize, x.draft));
            }
        }
        v
    });
    for (i, c) in cycles.iter().enumerate() {
        if c.phase != Phase::Decode {
            continue;
        }
        steps += 1;
        // Rejected shares of this cycle's draft and verify time, when its tokens are known.
        let shares = (i + 1 < cycles.len())
            .then(|| Some((c.rows?, c.candidates()?, c.accepted()?)))
            .flatten()
            .map(|(rows, cand, acc)| {
                let rej = (cand - acc).max(0) as f64;
                let d = if cand > 0 { rej / cand as f64 } else { 0.0 };
                (d, rej / rows.max(1) as f64)
            });
        known += usize::from(shares.is_some());
        // The step's kernels and their roles: its forwards' own where they overlap other
        // steps (`roles`), else every kernel in its window, drafts before the verify.
        let mine: Vec<(usize, bool)> = match &by_cycle {
            Some(r) => r.get(i).cloned().unwrap_or_default(),
            None => {
                let from = order.partition_point(|&j| k.gpu_start_ns[j as usize] < c.gpu_start_ns);
                order[from..]
                    .iter()
                    .map(|&j| j as usize)
                    .take_while(|&j| k.gpu_start_ns[j] < c.gpu_end_ns)
                    .map(|j| (j, k.gpu_start_ns[j] < c.verify_start_ns))
                    .collect()
            }
        };
        for (j, is_draft) in mine {
            let start = k.gpu_start_ns[j];
            let (b, ns) = (
                usize::from(p.kernel_bucket[j]).min(n - 1),
                (k.gpu_end_ns[j] - start).max(0),
            );
            if is_draft {
                draft[b] += ns;
            } else {
                verify[b] += ns;
            }
            if let Some((d, v)) = shares {
                rejected[b] += ns as f64 * if is_draft { d } else { v };
            }
        }
    }
    if steps == 0 {
        return Vec::new();
    }
    Bucket::ALL
        .iter()
        .enumerate()
        .filter(|&(b, _)| draft[b] + verify[b] > 0)
        .map(|(b, &bucket)| SpecBucket {
            bucket,
            draft_ms_per_step: draft[b] as f64 / 1e6 / steps as f64,
            verify_ms_per_step: verify[b] as f64 / 1e6 / steps as f64,
            rejected_ms_per_step: (known > 0).then(|| rejected[b] / 1e6 / known as f64),
        })
        .collect()
}
