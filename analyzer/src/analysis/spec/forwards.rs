//! Model forwards: the outermost `nn.Module` calls on each host thread (torch.profiler's
//! `with_modules`/`with_stack` scopes, or NVTX ranges named the same way), each with the GPU
//! work launched inside it and the shape of its first attention op (`record_shapes`).

use std::collections::HashMap;

use gapscope_traces::{MODULE_CALL_PREFIX, ScopeKind, StrId, Trace};

/// Which model ran a forward: a named instance (a module scope, a marker), or, in traces that
/// name none, the depth of its kernel sequence (`host_reads`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModelKey {
    Named(StrId),
    /// Forwards whose kernel counts cluster around this one.
    Depth(u32),
}

impl ModelKey {
    /// The model's name as the report shows it.
    pub fn render(self, trace: &Trace) -> String {
        match self {
            Self::Named(id) => trace.strings.get(id).to_owned(),
            Self::Depth(k) => format!("forwards of about {k} kernels"),
        }
    }
}

/// The query rows and key length of an attention op (`aten::scaled_dot_product_attention`'s
/// `[batch, heads, tokens, head_dim]` query and key): the tokens a forward feeds, and the
/// KV length it attends over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionShape {
    pub batch: i64,
    pub rows: i64,
    pub kv_len: i64,
}

impl AttentionShape {
    /// The cached length before the forward (what it attends over minus what it feeds).
    pub fn past(&self) -> i64 {
        self.kv_len - self.rows
    }
}

/// One call of a top-level module.
#[derive(Debug, Clone)]
pub struct Forward {
    /// The module instance (`nn.Module: LlamaForCausalLM_1`), or the forward's depth.
    pub instance: ModelKey,
    pub tid: u64,
    pub host_start_ns: i64,
    pub host_end_ns: i64,
    /// First kernel start and last kernel end on the primary device (`i64::MAX`/`MIN`
    /// without kernels).
    pub gpu_start_ns: i64,
    pub gpu_end_ns: i64,
    pub kernels: u32,
    /// Kernel time (sum of durations) on the primary device.
    pub busy_ns: i64,
    pub shape: Option<AttentionShape>,
    /// Tokens the forward fed, from its kernels' names where the engine puts them there
    /// (llama.cpp's `mul_mat_vec_q<type, ncols, …>`), when there is no shape.
    pub rows: Option<i64>,
    /// The forward's kernels, where the forward was cut from the kernel sequence
    /// (`host_reads`); empty for module scopes.
    pub kernel_ids: Vec<u32>,
}

impl Forward {
    /// A forward of `instance` with no kernels yet.
    pub fn new(instance: ModelKey) -> Self {
        Self {
            instance,
            tid: 0,
            host_start_ns: 0,
            host_end_ns: 0,
            gpu_start_ns: i64::MAX,
            gpu_end_ns: i64::MIN,
            kernels: 0,
            busy_ns: 0,
            shape: None,
            rows: None,
            kernel_ids: Vec::new(),
        }
    }

    pub fn has_kernels(&self) -> bool {
        self.kernels > 0
    }
}

/// Per host thread, the outermost module scopes sorted by start: (start, end, forward index).
struct Outermost(HashMap<u64, Vec<(i64, i64, usize)>>);

impl Outermost {
    fn find(&self, tid: u64, t: i64) -> Option<usize> {
        let v = self.0.get(&tid)?;
        let i = v.partition_point(|&(s, _, _)| s <= t);
        let &(s, e, f) = v.get(i.checked_sub(1)?)?;
        (s <= t && t <= e).then_some(f)
    }
}

/// The forwards of a trace in start order; empty without module scopes.
pub fn find(trace: &Trace, device: u32) -> Vec<Forward> {
    let sc = &trace.scopes;
    let module = ScopeKind::Module as u8;
    let mut by_tid: HashMap<u64, Vec<usize>> = HashMap::new();
    for i in 0..sc.len() {
        if sc.kind[i] == module
            && sc.host_end_ns[i] >= sc.host_start_ns[i]
            && trace
                .strings
                .get(sc.name[i])
                .starts_with(MODULE_CALL_PREFIX)
        {
            by_tid.entry(sc.tid[i]).or_default().push(i);
        }
    }
    let mut forwards = Vec::new();
    let mut outer = Outermost(HashMap::new());
    for (tid, mut idx) in by_tid {
        idx.sort_by_key(|&i| (sc.host_start_ns[i], std::cmp::Reverse(sc.host_end_ns[i])));
        let mut end = i64::MIN;
        let list = outer.0.entry(tid).or_default();
        for i in idx {
            if sc.host_start_ns[i] < end {
                continue; // nested in the current outermost call
            }
            end = sc.host_end_ns[i];
            list.push((sc.host_start_ns[i], end, forwards.len()));
            forwards.push(Forward {
                tid,
                host_start_ns: sc.host_start_ns[i],
                host_end_ns: end,
                ..Forward::new(ModelKey::Named(sc.name[i]))
            });
        }
    }
    if forwards.is_empty() {
        return forwards;
    }
    attach_kernels(trace, device, &outer, &mut forwards);
    attach_shapes(trace, &outer, &mut forwards);
    forwards.sort_by_key(|f| (f.host_start_ns, f.tid));
    forwards
}

fn attach_kernels(trace: &Trace, device: u32, outer: &Outermost, forwards: &mut [Forward]) {
    let l = &trace.launches;
    let mut of_corr: HashMap<u64, usize> = HashMap::with_capacity(l.len());
    for i in 0..l.len() {
        if let Some(f) = outer.find(l.tid[i], l.host_start_ns[i]) {
            of_corr.insert(l.correlation[i], f);
        }
    }
    let k = &trace.kernels;
    for i in 0..k.len() {
        if k.device[i] != device || k.correlation[i] == 0 {
            continue;
        }
        if let Some(&f) = of_corr.get(&k.correlation[i]) {
            let fw = &mut forwards[f];
            fw.gpu_start_ns = fw.gpu_start_ns.min(k.gpu_start_ns[i]);
            fw.gpu_end_ns = fw.gpu_end_ns.max(k.gpu_end_ns[i]);
            fw.kernels += 1;
            fw.busy_ns += (k.gpu_end_ns[i] - k.gpu_start_ns[i]).max(0);
        }
    }
}

/// The first attention op's shape in each forward: its query `[batch, heads, rows, dim]`
/// (input 0) and key `[batch, kv_heads, kv_len, dim]` (input 1).
fn attach_shapes(trace: &Trace, outer: &Outermost, forwards: &mut [Forward]) {
    let d = &trace.input_dims;
    let sc = &trace.scopes;
    let mut i = 0;
    while i < d.len() {
        let scope = d.scope[i];
        let mut j = i;
        let (mut q, mut k) = ([None; 4], [None; 4]);
        while j < d.len() && d.scope[j] == scope {
            let axis = usize::from(d.axis[j]);
            match d.input[j] {
                0 if axis < 4 => q[axis] = Some(d.size[j]),
                1 if axis < 4 => k[axis] = Some(d.size[j]),
                _ => {}
            }
            j += 1;
        }
        i = j;
        let s = scope as usize;
        if s >= sc.len() {
            continue;
        }
        let (Some(batch), Some(rows), Some(kv_len)) = (q[0], q[2], k[2]) else {
            continue;
        };
        if q[3].is_none() || rows <= 0 || kv_len < rows || batch <= 0 {
            continue;
        }
        if let Some(f) = outer.find(sc.tid[s], sc.host_start_ns[s]) {
            forwards[f].shape.get_or_insert(AttentionShape {
                batch,
                rows,
                kv_len,
            });
        }
    }
}
