//! The lever settings the engine is checked under, named: a `Levers` builder (`with_*`) and
//! the matrices the selftest, the GPU tests and the `levers` command run, so that none of them
//! spells a setting as an anonymous tuple. Every lever is meant to leave the greedy output
//! bit-identical; these matrices are how that is checked.

use crate::dispatch::{
    DispatchPolicy, HybridLevers, Levers, OutProjLayout, StateRead, StateUpdate,
};

impl Levers {
    pub fn with_graphs(self, graphs: bool) -> Self {
        Self { graphs, ..self }
    }

    pub fn with_paged_kv(self, paged_kv: bool) -> Self {
        Self { paged_kv, ..self }
    }

    pub fn with_pdl(self, pdl: bool) -> Self {
        Self { pdl, ..self }
    }

    pub fn with_fusion(self, fusion: bool) -> Self {
        Self { fusion, ..self }
    }

    /// The dispatch threshold: batches up to this run the GEMV/MMVQ, larger ones the GEMM.
    pub fn with_mmvq_max_batch(self, mmvq_max_batch: usize) -> Self {
        self.with_dispatch(DispatchPolicy {
            mmvq_max_batch,
            ..self.dispatch
        })
    }

    /// The batch-1 K-split MMVQ from this K (0: always; `usize::MAX`: never).
    pub fn with_b1_k_split_min_k(self, mmvq_b1_k_split_min_k: usize) -> Self {
        self.with_dispatch(DispatchPolicy {
            mmvq_b1_k_split_min_k,
            ..self.dispatch
        })
    }

    /// The batch-1 contiguous-load MMVQ from this many rows per K (0: always; `usize::MAX`:
    /// never).
    pub fn with_b1_pair_min_rows_per_k(self, mmvq_b1_pair_min_rows_per_k: usize) -> Self {
        self.with_dispatch(DispatchPolicy {
            mmvq_b1_pair_min_rows_per_k,
            ..self.dispatch
        })
    }

    fn with_dispatch(self, dispatch: DispatchPolicy) -> Self {
        Self { dispatch, ..self }
    }

    pub fn with_hybrid(self, hybrid: HybridLevers) -> Self {
        Self { hybrid, ..self }
    }
}

/// The eight settings of the three hybrid levers, the all-slow one first and the default
/// (all-fast) one last.
pub fn hybrid_settings() -> Vec<HybridLevers> {
    let mut out = Vec::with_capacity(8);
    for state_update in [StateUpdate::Copy, StateUpdate::Inplace] {
        for state_read in [StateRead::Gather, StateRead::FusedIds] {
            for out_proj in [OutProjLayout::ThreeD, OutProjLayout::TwoD] {
                out.push(HybridLevers {
                    state_update,
                    state_read,
                    out_proj,
                });
            }
        }
    }
    out
}

/// The `levers` command's extra settings for a hybrid model: every hybrid setting with CUDA
/// graphs on and off (PDL following graphs), the other levers at their defaults.
pub fn hybrid_command_matrix() -> Vec<Levers> {
    let mut out = Vec::with_capacity(16);
    for graphs in [true, false] {
        for h in hybrid_settings() {
            out.push(
                Levers::default()
                    .with_graphs(graphs)
                    .with_pdl(graphs)
                    .with_hybrid(h),
            );
        }
    }
    out
}

/// The selftest's whole-model settings for the hybrid model: all slow with graphs and eager
/// (contiguous KV), all fast, and two mixed settings.
pub fn selftest_hybrid_levers() -> Vec<Levers> {
    let h = |state_update, state_read, out_proj| HybridLevers {
        state_update,
        state_read,
        out_proj,
    };
    let base = Levers::default();
    vec![
        base.with_hybrid(HybridLevers::SLOW),
        base.with_hybrid(HybridLevers::SLOW)
            .with_graphs(false)
            .with_pdl(false)
            .with_paged_kv(false),
        base,
        base.with_hybrid(h(
            StateUpdate::Copy,
            StateRead::FusedIds,
            OutProjLayout::TwoD,
        )),
        base.with_hybrid(h(
            StateUpdate::Inplace,
            StateRead::Gather,
            OutProjLayout::ThreeD,
        ))
        .with_graphs(false)
        .with_pdl(false),
    ]
}

/// Every variant with CUDA graphs on and off (outer) and a paged and a contiguous KV cache
/// (inner); each variant's own `graphs` and `paged_kv` are overwritten.
pub fn lever_matrix(variants: &[Levers]) -> Vec<Levers> {
    let mut out = Vec::with_capacity(4 * variants.len());
    for graphs in [true, false] {
        for paged_kv in [true, false] {
            out.extend(
                variants
                    .iter()
                    .map(|v| v.with_graphs(graphs).with_paged_kv(paged_kv)),
            );
        }
    }
    out
}

/// The `levers` command's settings. PDL follows the graphs lever instead of doubling the
/// matrix: graph replays run with it, eager steps without, so any PDL effect on the output
/// shows as a second md5. Fusion is on throughout `thresholds` under graphs x KV layout, plus
/// the four graphs x KV settings with it off at the default threshold; then the batch-1
/// K-split MMVQ forced on (0) and off (max), and the contiguous-load batch-1 entry forced on
/// and off (with the split off), at the defaults.
pub fn levers_command_matrix(thresholds: &[usize]) -> Vec<Levers> {
    let base = Levers::default().with_fusion(true);
    let on: Vec<Levers> = thresholds
        .iter()
        .map(|&t| base.with_mmvq_max_batch(t))
        .collect();
    let mut out = lever_matrix(&on);
    out.extend(lever_matrix(&[base.with_fusion(false)]));
    for k_split in [0, usize::MAX] {
        out.push(base.with_b1_k_split_min_k(k_split));
    }
    for pair in [0, usize::MAX] {
        out.push(
            base.with_b1_k_split_min_k(usize::MAX)
                .with_b1_pair_min_rows_per_k(pair),
        );
    }
    out.into_iter().map(|l| l.with_pdl(l.graphs)).collect()
}

/// The selftest's whole-model settings under the engine numerics. The last two run untimed
/// (the selftest turns launch timing off with PDL) so programmatic dependent launch is live.
pub fn selftest_levers() -> Vec<Levers> {
    let case = |paged_kv, graphs, mmvq_max_batch, pdl, fusion| {
        Levers::default()
            .with_paged_kv(paged_kv)
            .with_graphs(graphs)
            .with_mmvq_max_batch(mmvq_max_batch)
            .with_pdl(pdl)
            .with_fusion(fusion)
    };
    vec![
        case(true, false, 8, false, true),
        case(false, true, 8, false, false),
        case(true, true, 0, false, true),
        case(true, true, 8, true, true),
        case(false, true, 8, true, false),
    ]
}

/// The selftest's whole-model settings under the hf-bf16 numerics: graphs with a paged cache,
/// and eager steps with a contiguous one, other levers at their defaults.
pub fn selftest_hf_levers() -> Vec<Levers> {
    vec![
        Levers::default(),
        Levers::default().with_graphs(false).with_paged_kv(false),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `levers` command's matrix as its loops built it from 6-tuples
    /// (graphs, paged, threshold, fusion, k-split, pair), PDL = graphs.
    fn command_matrix_as_tuples(thresholds: &[usize]) -> Vec<Levers> {
        let d = DispatchPolicy::default();
        let (ks, pr, thr) = (
            d.mmvq_b1_k_split_min_k,
            d.mmvq_b1_pair_min_rows_per_k,
            d.mmvq_max_batch,
        );
        let mut m = Vec::new();
        for graphs in [true, false] {
            for paged in [true, false] {
                for &t in thresholds {
                    m.push((graphs, paged, t, true, ks, pr));
                }
            }
        }
        for graphs in [true, false] {
            for paged in [true, false] {
                m.push((graphs, paged, thr, false, ks, pr));
            }
        }
        for k in [0, usize::MAX] {
            m.push((true, true, thr, true, k, pr));
        }
        for p in [0, usize::MAX] {
            m.push((true, true, thr, true, usize::MAX, p));
        }
        m.into_iter()
            .map(|(graphs, paged_kv, t, fusion, k, p)| Levers {
                graphs,
                paged_kv,
                dispatch: DispatchPolicy {
                    mmvq_max_batch: t,
                    mmvq_b1_k_split_min_k: k,
                    mmvq_b1_pair_min_rows_per_k: p,
                    ..DispatchPolicy::default()
                },
                pdl: graphs,
                fusion,
                ..Levers::default()
            })
            .collect()
    }

    #[test]
    fn the_matrix_runs_every_threshold_then_the_forced_entries() {
        let d = DispatchPolicy::default();
        let m: Vec<_> = levers_command_matrix(&[0, 4, 8, 16, 256])
            .iter()
            .map(|l| {
                let p = l.dispatch;
                let t = (l.graphs, l.paged_kv, p.mmvq_max_batch, l.fusion);
                (
                    t.0,
                    t.1,
                    t.2,
                    t.3,
                    p.mmvq_b1_k_split_min_k,
                    p.mmvq_b1_pair_min_rows_per_k,
                )
            })
            .collect();
        // 2 graphs x 2 KV layouts x 5 thresholds, 4 without fusion, 2 K-split, 2 pair.
        assert_eq!(m.len(), 20 + 4 + 2 + 2);
        assert_eq!(
            m[0],
            (
                true,
                true,
                0,
                true,
                d.mmvq_b1_k_split_min_k,
                d.mmvq_b1_pair_min_rows_per_k
            )
        );
        assert_eq!(m.iter().filter(|s| !s.3).count(), 4);
        assert!(m.iter().filter(|s| !s.3).all(|s| s.2 == d.mmvq_max_batch));
        assert_eq!(
            m[m.len() - 2..],
            [
                (true, true, d.mmvq_max_batch, true, usize::MAX, 0),
                (true, true, d.mmvq_max_batch, true, usize::MAX, usize::MAX)
            ]
        );
    }

    #[test]
    fn the_command_matrix_is_the_one_its_loops_built() {
        for thresholds in [vec![8], vec![0, 4, 8, 64], vec![]] {
            assert_eq!(
                levers_command_matrix(&thresholds),
                command_matrix_as_tuples(&thresholds)
            );
        }
    }

    #[test]
    fn the_selftest_settings_are_the_ones_its_tuples_named() {
        let tuples = [
            (true, false, 8usize, false, true),
            (false, true, 8, false, false),
            (true, true, 0, false, true),
            (true, true, 8, true, true),
            (false, true, 8, true, false),
        ];
        let want: Vec<Levers> = tuples
            .iter()
            .map(|&(paged, graphs, thr, pdl, fusion)| Levers {
                graphs,
                paged_kv: paged,
                dispatch: DispatchPolicy {
                    mmvq_max_batch: thr,
                    ..DispatchPolicy::default()
                },
                pdl,
                fusion,
                ..Levers::default()
            })
            .collect();
        assert_eq!(selftest_levers(), want);
        let hf: Vec<Levers> = [(true, true), (false, false)]
            .iter()
            .map(|&(paged, graphs)| Levers {
                graphs,
                paged_kv: paged,
                ..Levers::default()
            })
            .collect();
        assert_eq!(selftest_hf_levers(), hf);
    }

    #[test]
    fn hybrid_matrices_cover_every_setting_once() {
        let all = hybrid_settings();
        assert_eq!(all.len(), 8);
        assert_eq!(all[0], HybridLevers::SLOW);
        assert_eq!(all[7], HybridLevers::default());
        for (i, a) in all.iter().enumerate() {
            assert!(!all[i + 1..].contains(a));
        }
        let m = hybrid_command_matrix();
        assert_eq!(m.len(), 16);
        assert!(m.iter().all(|l| l.pdl == l.graphs));
        assert_eq!(m.iter().filter(|l| l.graphs).count(), 8);
        assert_eq!(selftest_hybrid_levers()[2], Levers::default());
    }

    /// Graphs outer, KV layout inner, the variants in their order within each.
    #[test]
    fn the_matrix_crosses_graphs_and_kv_layout() {
        let v = [
            Levers::default().with_mmvq_max_batch(0),
            Levers::default().with_mmvq_max_batch(8).with_pdl(false),
        ];
        let m = lever_matrix(&v);
        assert_eq!(m.len(), 8);
        let mut i = 0;
        for graphs in [true, false] {
            for paged_kv in [true, false] {
                for x in &v {
                    assert_eq!(m[i], x.with_graphs(graphs).with_paged_kv(paged_kv));
                    i += 1;
                }
            }
        }
    }
}
