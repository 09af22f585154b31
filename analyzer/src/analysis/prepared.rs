//! The analysis view of a trace: each kernel's and memop's bucket, and start-sorted orders,
//! computed once and shared by step detection and decomposition.

use gapscope_traces::{MemopKind, NO_STR, Trace};

use super::host::HostIndex;
use super::host::forest::{NONE, is_transparent_module};
use crate::bucket::Bucket;
use crate::rules::RuleSet;

/// Buckets and orderings for one trace.
pub struct Prepared<'t> {
    pub trace: &'t Trace,
    /// Bucket index per kernel.
    pub kernel_bucket: Vec<u8>,
    /// Bucket index per memop.
    pub memop_bucket: Vec<u8>,
    /// Kernel indices sorted by (device, start).
    pub kernel_order: Vec<u32>,
    /// Memop indices sorted by (device, start).
    pub memop_order: Vec<u32>,
    /// Devices present, with kernel count, most kernels first.
    pub devices: Vec<(u32, usize)>,
    /// The host scopes and launch records, when scope rules needed them for the buckets
    /// (otherwise `analyze` builds them itself, beside step detection).
    pub host: Option<HostIndex>,
    /// Kernels whose bucket a scope rule decided.
    pub scope_classified: usize,
}

/// Whether any host scope or host range of the trace has a name a scope rule matches (so
/// buckets depend on the scopes).
fn scope_rules_apply(trace: &Trace, rules: &RuleSet) -> bool {
    if !rules.has_scope_rules() {
        return false;
    }
    let mut seen = vec![false; trace.strings.len()];
    let host_markers = (0..trace.markers.len)
        .filter(|&i| trace.markers.host_start_ns[i] != i64::MIN)
        .map(|i| trace.markers.name[i]);
    trace
        .scopes
        .name
        .iter()
        .copied()
        .chain(host_markers)
        .any(|id| match seen.get_mut(id as usize) {
            Some(v) if !*v => {
                *v = true;
                rules.first_scope_rule(trace.strings.get(id)).is_some()
            }
            _ => false,
        })
}

impl<'t> Prepared<'t> {
    pub fn new(trace: &'t Trace, rules: &RuleSet) -> Self {
        let k = &trace.kernels;
        // Classify each distinct name once; engine traces carry their bucket directly.
        // Name ids are dense, so a vector is the cache (a hash map costs more than the
        // whole rest of the pass on 10M kernels).
        const UNSET: u8 = u8::MAX;
        let nstr = trace.strings.len();
        let mut by_name = vec![UNSET; nstr];
        let mut by_engine = vec![UNSET; nstr];
        let has_engine_bucket = k.bucket.len() == k.len;
        // Scope rules decide only when some scope name matches one.
        let host = scope_rules_apply(trace, rules).then(|| HostIndex::build(trace));
        // First matching rule position per name, for kernel names and for scope names.
        const UNSEEN: u32 = u32::MAX;
        const NO_RULE: u32 = u32::MAX - 1;
        let cache_len = if host.is_some() { nstr } else { 0 };
        let mut kernel_pos = vec![UNSEEN; cache_len];
        let mut scope_pos = vec![UNSEEN; cache_len];
        let pos_of = |cache: &mut Vec<u32>, id: u32, f: &dyn Fn(&str) -> Option<usize>| match cache
            .get_mut(id as usize)
        {
            Some(v) if *v != UNSEEN => *v,
            Some(v) => {
                *v = f(trace.strings.get(id)).map_or(NO_RULE, |p| p as u32);
                *v
            }
            None => NO_RULE,
        };
        let m = &trace.memops;
        // The start orders and the device counts on the other core while the buckets are
        // found here.
        std::thread::scope(|s| {
            let orders = s.spawn(|| {
                let kernel_order = sorted_order(&k.device, &k.gpu_start_ns, k.len);
                let memop_order = sorted_order(&m.device, &m.gpu_start_ns, m.len);
                let devices = device_counts(trace, &kernel_order);
                (kernel_order, memop_order, devices)
            });
            let mut scope_classified = 0usize;
            let mut kernel_bucket = Vec::with_capacity(k.len);
            for i in 0..k.len {
                let eb = if has_engine_bucket {
                    k.bucket[i]
                } else {
                    NO_STR
                };
                let b = if eb != NO_STR {
                    let slot = by_engine.get_mut(eb as usize);
                    match slot {
                        Some(v) if *v != UNSET => *v,
                        Some(v) => {
                            *v =
                                Bucket::parse(trace.strings.get(eb)).unwrap_or(Bucket::Other) as u8;
                            *v
                        }
                        None => Bucket::Other as u8,
                    }
                } else if let Some((forest, node)) = host.as_ref().and_then(|h| {
                    let li = h.launch_map.launch_of(k.correlation[i])?;
                    let node = h.launch_map.launch_scope[li as usize];
                    (node != NONE).then_some((&h.forest, node))
                }) {
                    // Scope rules see the scopes from the launch's innermost up to its innermost
                    // nn.Module (looking through activation-like wrappers); the first rule in
                    // list order wins, as for names.
                    let mut best = NO_RULE;
                    for (_, n) in forest.stack(node) {
                        best = best.min(pos_of(&mut scope_pos, n.name, &|s| {
                            rules.first_scope_rule(s)
                        }));
                        if n.kind == gapscope_traces::ScopeKind::Module
                            && !is_transparent_module(trace.strings.get(n.name))
                        {
                            break;
                        }
                    }
                    let kp = pos_of(&mut kernel_pos, k.name[i], &|s| rules.first_kernel_rule(s));
                    if best < kp {
                        scope_classified += 1;
                    }
                    let first = best.min(kp);
                    rules.bucket_at((first != NO_RULE).then_some(first as usize)) as u8
                } else {
                    let name = k.name[i];
                    match by_name.get_mut(name as usize) {
                        Some(v) if *v != UNSET => *v,
                        Some(v) => {
                            *v = rules.classify_kernel(trace.strings.get(name)) as u8;
                            *v
                        }
                        None => rules.classify_kernel("") as u8,
                    }
                };
                kernel_bucket.push(b);
            }
            let memop_bucket = (0..m.len)
                .map(|i| rules.classify_memop(MemopKind::from_code(m.kind[i])) as u8)
                .collect();
            let (kernel_order, memop_order, devices) = orders
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e));
            Self {
                trace,
                kernel_bucket,
                memop_bucket,
                kernel_order,
                memop_order,
                devices,
                host,
                scope_classified,
            }
        })
    }

    /// The device with the most kernels; steps are detected on it.
    pub fn primary_device(&self) -> Option<u32> {
        self.devices.first().map(|d| d.0)
    }

    /// Start-sorted kernel indices of one device (a sub-slice of `kernel_order`).
    pub fn kernels_on(&self, device: u32) -> &[u32] {
        slice_for(&self.kernel_order, &self.trace.kernels.device, device)
    }

    pub fn memops_on(&self, device: u32) -> &[u32] {
        slice_for(&self.memop_order, &self.trace.memops.device, device)
    }
}

/// Devices with their kernel counts, most kernels first (memop-only devices last, with 0).
fn device_counts(trace: &Trace, kernel_order: &[u32]) -> Vec<(u32, usize)> {
    let k = &trace.kernels;
    // Devices are few: count runs in the (device, start) order.
    let mut devices: Vec<(u32, usize)> = Vec::new();
    for &i in kernel_order {
        let d = k.device[i as usize];
        match devices.last_mut() {
            Some((ld, c)) if *ld == d => *c += 1,
            _ => devices.push((d, 1)),
        }
    }
    for &d in &trace.memops.device {
        if !devices.iter().any(|(x, _)| *x == d) {
            devices.push((d, 0));
        }
    }
    devices.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    devices
}

fn sorted_order(device: &[u32], start: &[i64], len: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..len as u32).collect();
    let key = |i: u32| (device[i as usize], start[i as usize]);
    let sorted = order.windows(2).all(|w| key(w[0]) <= key(w[1]));
    if !sorted {
        order.sort_unstable_by_key(|&i| (key(i), i));
    }
    order
}

fn slice_for<'a>(order: &'a [u32], device: &[u32], d: u32) -> &'a [u32] {
    let lo = order.partition_point(|&i| device[i as usize] < d);
    let hi = order.partition_point(|&i| device[i as usize] <= d);
    &order[lo..hi]
}
