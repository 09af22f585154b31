//! One rank's collectives: its communication kernels inside the report's steps, in GPU
//! order, with their kind read from the kernel name.

use serde::Serialize;

use crate::Bucket;
use crate::session::AnalyzedRun;
use crate::tables::NO_STEP;

/// What a collective does, from its kernel name (NCCL, RCCL, vLLM's custom all-reduce).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum CollectiveKind {
    AllReduce = 0,
    AllGather = 1,
    ReduceScatter = 2,
    Broadcast = 3,
    Reduce = 4,
    AllToAll = 5,
    SendRecv = 6,
    Other = 7,
}

impl CollectiveKind {
    pub const ALL: [CollectiveKind; 8] = [
        Self::AllReduce,
        Self::AllGather,
        Self::ReduceScatter,
        Self::Broadcast,
        Self::Reduce,
        Self::AllToAll,
        Self::SendRecv,
        Self::Other,
    ];

    /// The kind a communication kernel's name says.
    pub fn of_name(name: &str) -> Self {
        let n: String = name
            .chars()
            .filter(|c| *c != '_')
            .flat_map(char::to_lowercase)
            .collect();
        let has = |s: &str| n.contains(s);
        if has("allreduce") || has("crossdevicereduce") {
            Self::AllReduce
        } else if has("allgather") {
            Self::AllGather
        } else if has("reducescatter") {
            Self::ReduceScatter
        } else if has("broadcast") {
            Self::Broadcast
        } else if has("alltoall") {
            Self::AllToAll
        } else if has("sendrecv") || has("send") || has("recv") {
            Self::SendRecv
        } else if has("reduce") {
            Self::Reduce
        } else {
            Self::Other
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::AllReduce => "all_reduce",
            Self::AllGather => "all_gather",
            Self::ReduceScatter => "reduce_scatter",
            Self::Broadcast => "broadcast",
            Self::Reduce => "reduce",
            Self::AllToAll => "all_to_all",
            Self::SendRecv => "send_recv",
            Self::Other => "other",
        }
    }
}

/// The transfer floor of one collective of `bytes` among `ranks` GPUs over links of
/// `link_bytes_per_s` each way: the bytes each GPU must send over its link (a ring
/// all-reduce sends 2(n−1)/n of the message, an all-gather or reduce-scatter (n−1)/n, the
/// others the message once) at the link's rate. Latency is not counted: for small messages
/// the floor is far below what any collective takes.
pub fn transfer_floor_s(
    kind: CollectiveKind,
    bytes: f64,
    ranks: u32,
    link_bytes_per_s: f64,
) -> Option<f64> {
    if ranks < 2 || link_bytes_per_s <= 0.0 || bytes.is_nan() || bytes < 0.0 {
        return None;
    }
    let n = f64::from(ranks);
    let share = match kind {
        CollectiveKind::AllReduce => 2.0 * (n - 1.0) / n,
        CollectiveKind::AllGather | CollectiveKind::ReduceScatter | CollectiveKind::AllToAll => {
            (n - 1.0) / n
        }
        _ => 1.0,
    };
    Some(bytes * share / link_bytes_per_s)
}

/// Communication in a trace's report steps against the links' floor: the messages' bytes
/// per step (Kineto's `In msg nelems` × `dtype` on NCCL kernels) and the time they need at
/// the GPU's link bandwidth among the run's ranks.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct MessageFloor {
    /// Median message of one collective, bytes.
    pub message_bytes_median: f64,
    pub message_bytes_per_step: f64,
    pub ranks: u32,
    pub link_bytes_per_s: f64,
    /// The transfer floor of the median collective, and of a step's collectives, ms.
    pub floor_ms_per_collective: f64,
    pub floor_ms_per_step: f64,
}

/// The floor of `colls`, `trace`'s collectives in its report steps ([`collectives_of`]),
/// when their messages, the rank count and the GPU's link bandwidth are known.
pub fn message_floor(
    trace: &gapscope_traces::Trace,
    t: &crate::tables::Tables,
    colls: &[Collective],
    ranks: Option<u32>,
) -> Option<MessageFloor> {
    let first = colls.first()?;
    let ranks = ranks.or(trace.manifest.world_size).filter(|&r| r >= 2)?;
    let device = trace.kernels.device[first.kernel as usize];
    let gpu = trace.manifest.gpus.iter().find(|g| g.device == device)?;
    let link = crate::roofline::hw::lookup(&gpu.name)
        .ok()?
        .link_bytes_per_s;
    let steps = t.report_steps().len();
    let mut bytes: Vec<i64> = Vec::with_capacity(colls.len());
    let mut floor_s = 0.0;
    for c in colls {
        let b = trace
            .kernels
            .bytes
            .get(c.kernel as usize)
            .copied()
            .unwrap_or(-1);
        if b < 0 {
            return None;
        }
        bytes.push(b);
        floor_s += transfer_floor_s(c.kind, b as f64, ranks, link)?;
    }
    let total: i64 = bytes.iter().sum();
    bytes.sort_unstable();
    let median = bytes[bytes.len() / 2] as f64;
    Some(MessageFloor {
        message_bytes_median: median,
        message_bytes_per_step: total as f64 / steps.max(1) as f64,
        ranks,
        link_bytes_per_s: link,
        floor_ms_per_collective: transfer_floor_s(first.kind, median, ranks, link)? * 1e3,
        floor_ms_per_step: floor_s * 1e3 / steps.max(1) as f64,
    })
}

/// One communication kernel of one rank.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Collective {
    /// Its row in the rank's kernel table.
    pub kernel: u32,
    /// The rank's step (index into its step table) that holds it.
    pub step: u32,
    pub kind: CollectiveKind,
    pub gpu_start_ns: i64,
    pub gpu_end_ns: i64,
}

/// The communication kernels inside `run`'s report steps (on the steps' device), in start
/// order.
pub fn collectives(run: &AnalyzedRun) -> Vec<Collective> {
    collectives_of(&run.trace, &run.tables)
}

/// [`collectives`] of a trace and its tables.
pub fn collectives_of(
    trace: &gapscope_traces::Trace,
    t: &crate::tables::Tables,
) -> Vec<Collective> {
    let k = &trace.kernels;
    let comm = Bucket::Comm as u8;
    let mut out: Vec<Collective> = (0..k.len)
        .filter(|&i| t.kernel_bucket.get(i) == Some(&comm))
        .filter_map(|i| {
            let step = *t.kernel_step.get(i)?;
            let s = step as usize;
            (step != NO_STEP && s < t.steps.len && t.steps.in_report[s] != 0).then(|| Collective {
                kernel: i as u32,
                step,
                kind: CollectiveKind::of_name(trace.strings.get(k.name[i])),
                gpu_start_ns: k.gpu_start_ns[i],
                gpu_end_ns: k.gpu_end_ns[i].max(k.gpu_start_ns[i]),
            })
        })
        .collect();
    out.sort_by_key(|c| (c.gpu_start_ns, c.kernel));
    out
}

#[cfg(test)]
mod tests {
    use super::CollectiveKind as K;

    #[test]
    fn kinds_from_names() {
        let cases = [
            (
                "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                K::AllReduce,
            ),
            (
                "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)",
                K::AllGather,
            ),
            (
                "ncclDevKernel_ReduceScatter_Sum_f32_RING_SIMPLE",
                K::ReduceScatter,
            ),
            ("ncclDevKernel_Broadcast_RING_LL", K::Broadcast),
            (
                "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
                K::SendRecv,
            ),
            ("ncclDevKernel_Reduce_Sum_f16_RING_LL", K::Reduce),
            (
                "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 2>(...)",
                K::AllReduce,
            ),
            ("rcclGenericKernel<1, false>", K::Other),
        ];
        for (n, k) in cases {
            assert_eq!(K::of_name(n), k, "{n}");
        }
    }
}
