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
    let k = &run.trace.kernels;
    let t = &run.tables;
    let comm = Bucket::Comm as u8;
    let mut out: Vec<Collective> = (0..k.len)
        .filter(|&i| t.kernel_bucket.get(i) == Some(&comm))
        .filter_map(|i| {
            let step = *t.kernel_step.get(i)?;
            let s = step as usize;
            (step != NO_STEP && s < t.steps.len && t.steps.in_report[s] != 0).then(|| Collective {
                kernel: i as u32,
                step,
                kind: CollectiveKind::of_name(run.trace.strings.get(k.name[i])),
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
