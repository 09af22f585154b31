//! One kernel or memop, named by reference, and the details the explorer shows on hover.

use gapscope_traces::{MemopKind, NO_STR, Trace};

use crate::bucket::Bucket;

/// A kernel index, or a memop index with the top bit set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActRef(pub u32);

const MEMOP_BIT: u32 = 1 << 31;

impl ActRef {
    pub fn kernel(i: usize) -> Self {
        Self(i as u32)
    }
    pub fn memop(i: usize) -> Self {
        Self(i as u32 | MEMOP_BIT)
    }
    pub fn is_memop(self) -> bool {
        self.0 & MEMOP_BIT != 0
    }
    pub fn index(self) -> usize {
        (self.0 & !MEMOP_BIT) as usize
    }
}

/// What the explorer's hover shows about one activity.
#[derive(Debug, Clone, PartialEq)]
pub struct ActivityDetail {
    pub name: String,
    pub bucket: Bucket,
    pub device: u32,
    pub stream: u32,
    pub start_ns: i64,
    pub dur_ns: i64,
    pub correlation: u64,
    /// Kernels: grid and block dimensions.
    pub grid: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
    /// Memops: the copy or set kind (HtoD, DtoD, ...).
    pub memop_kind: Option<String>,
    /// Bytes moved (memops; engine kernels' model-derived bytes), when known.
    pub bytes: Option<u64>,
    /// Engine kernels' model-derived FLOPs, when known.
    pub flops: Option<u64>,
    /// `bytes` over the duration, GB/s.
    pub achieved_gb_per_s: Option<f64>,
    /// `flops` over the duration, TFLOP/s.
    pub achieved_tflops: Option<f64>,
    /// CUDA graph id and node (0 when not launched from a graph).
    pub graph_id: u32,
    pub graph_node: u64,
    /// Engine traces: the op and the decoder layer.
    pub op: Option<String>,
    pub layer: Option<i32>,
}

impl ActivityDetail {
    pub fn of(trace: &Trace, kernel_bucket: &[u8], memop_bucket: &[u8], a: ActRef) -> Option<Self> {
        let i = a.index();
        let bucket_of =
            |v: &[u8]| Bucket::ALL[v.get(i).copied().unwrap_or(Bucket::Other as u8) as usize];
        let rate = |amount: Option<u64>, dur: i64, scale: f64| {
            amount
                .filter(|_| dur > 0)
                .map(|x| x as f64 / dur as f64 * 1e9 / scale)
        };
        if a.is_memop() {
            let m = &trace.memops;
            if i >= m.len {
                return None;
            }
            let dur = (m.gpu_end_ns[i] - m.gpu_start_ns[i]).max(0);
            let bytes = (m.bytes[i] > 0).then_some(m.bytes[i]);
            Some(Self {
                name: trace.strings.get(m.name[i]).to_owned(),
                bucket: bucket_of(memop_bucket),
                device: m.device[i],
                stream: m.stream[i],
                start_ns: m.gpu_start_ns[i],
                dur_ns: dur,
                correlation: m.correlation[i],
                grid: None,
                block: None,
                memop_kind: Some(MemopKind::from_code(m.kind[i]).as_str().to_owned()),
                bytes,
                flops: None,
                achieved_gb_per_s: rate(bytes, dur, 1e9),
                achieved_tflops: None,
                graph_id: m.graph_id[i],
                graph_node: 0,
                op: None,
                layer: None,
            })
        } else {
            let k = &trace.kernels;
            if i >= k.len {
                return None;
            }
            let dur = (k.gpu_end_ns[i] - k.gpu_start_ns[i]).max(0);
            let opt = |v: &[i64]| v.get(i).copied().filter(|&x| x >= 0).map(|x| x as u64);
            let bytes = opt(&k.bytes);
            let flops = opt(&k.flops);
            let dims = |x: &[u32], y: &[u32], z: &[u32]| {
                let d = [x[i], y[i], z[i]];
                (d != [0, 0, 0]).then_some(d)
            };
            Some(Self {
                name: trace.strings.get(k.name[i]).to_owned(),
                bucket: bucket_of(kernel_bucket),
                device: k.device[i],
                stream: k.stream[i],
                start_ns: k.gpu_start_ns[i],
                dur_ns: dur,
                correlation: k.correlation[i],
                grid: dims(&k.grid_x, &k.grid_y, &k.grid_z),
                block: dims(&k.block_x, &k.block_y, &k.block_z),
                memop_kind: None,
                bytes,
                flops,
                achieved_gb_per_s: rate(bytes, dur, 1e9),
                achieved_tflops: rate(flops, dur, 1e12),
                graph_id: k.graph_id[i],
                graph_node: k.graph_node_id[i],
                op: k
                    .op
                    .get(i)
                    .copied()
                    .filter(|&o| o != NO_STR)
                    .map(|o| trace.strings.get(o).to_owned()),
                layer: k.layer.get(i).copied().filter(|&l| l >= 0),
            })
        }
    }
}
