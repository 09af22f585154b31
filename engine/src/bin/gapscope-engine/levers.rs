//! `gapscope-engine levers`: every lever setting on the same prompts; the greedy md5 must not
//! change (exit 1 when it does).

use crate::args::{ModelArgs, check_shape, load, write_json};
use crate::env::open_device;
use gapscope_engine::Result;
use gapscope_engine::bench::{self, BenchSettings};
use gapscope_engine::cuda::{Capacity, CudaBackend, Timing};
use gapscope_engine::dispatch::{DispatchPolicy, Levers};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct LeversArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[arg(long, default_value = "1,16", value_delimiter = ',')]
    npl: Vec<usize>,
    #[arg(long, default_value_t = 32)]
    npp: usize,
    #[arg(long, default_value_t = 32)]
    ntg: usize,
    /// GEMV/GEMM dispatch thresholds (`mmvq_max_batch`) to run. 0 and 256 move batch 1
    /// off its own GEMV entries and the prefill off the GEMM, which for bf16 changes the
    /// bits (the determinism goal is 4/8/16).
    #[arg(long, default_value = "0,4,8,16,256", value_delimiter = ',')]
    thresholds: Vec<usize>,
    #[arg(long)]
    json: Option<PathBuf>,
    #[arg(long, default_value_t = 0)]
    device: usize,
}

/// One lever setting: (graphs, paged KV, mmvq_max_batch, fusion, b1 K-split min K, b1 pair
/// min rows per K). PDL follows the graphs lever.
type Setting = (bool, bool, usize, bool, usize, usize);

/// The settings to run. PDL follows the graphs lever instead of doubling the matrix: graph
/// replays run with it, eager steps without, so any PDL effect on the output shows as a second
/// md5. Fusion is on throughout, plus four settings with it off at the default threshold; then
/// the batch-1 K-split MMVQ forced on (0) and off (max), and the contiguous-load batch-1 entry
/// forced on and off (with the split off), at the defaults.
fn matrix(thresholds: &[usize]) -> Vec<Setting> {
    let d = DispatchPolicy::default();
    let (thr_default, ks_default, pr_default) = (
        d.mmvq_max_batch,
        d.mmvq_b1_k_split_min_k,
        d.mmvq_b1_pair_min_rows_per_k,
    );
    let mut matrix = Vec::new();
    for graphs in [true, false] {
        for paged in [true, false] {
            for &thr in thresholds {
                matrix.push((graphs, paged, thr, true, ks_default, pr_default));
            }
        }
    }
    for graphs in [true, false] {
        for paged in [true, false] {
            matrix.push((graphs, paged, thr_default, false, ks_default, pr_default));
        }
    }
    for ks in [0, usize::MAX] {
        matrix.push((true, true, thr_default, true, ks, pr_default));
    }
    for pr in [0, usize::MAX] {
        matrix.push((true, true, thr_default, true, usize::MAX, pr));
    }
    matrix
}

pub fn run(a: LeversArgs) -> Result<ExitCode> {
    check_shape(&a.npl, a.npp, a.ntg, 1)?;
    let (cfg, w) = load(&a.model)?;
    let maxn = *a.npl.iter().max().unwrap_or(&1);
    let cap = Capacity {
        max_seqs: maxn,
        max_ctx: a.npp + a.ntg + 1,
        max_rows: maxn * a.npp,
    };
    let settings = BenchSettings {
        npl: a.npl.clone(),
        npp: a.npp,
        ntg: a.ntg,
        reps: 1,
        warmup: 0,
        seed: a.model.seed,
        prompt: None,
    };
    let mut results = Vec::new();
    for (graphs, paged, thr, fusion, ks, pr) in matrix(&a.thresholds) {
        let pdl = graphs;
        let lv = Levers {
            graphs,
            paged_kv: paged,
            dispatch: DispatchPolicy {
                mmvq_max_batch: thr,
                mmvq_b1_k_split_min_k: ks,
                mmvq_b1_pair_min_rows_per_k: pr,
                ..DispatchPolicy::default()
            },
            pdl,
            fusion,
        };
        let dev = open_device(a.device)?;
        let mut be = CudaBackend::new(dev, &cfg, &w, lv, cap, Timing::Off)?;
        let rows = bench::run(&mut be, &settings, None, |_| Ok(()), |_| {})?;
        for r in rows {
            println!(
                "graphs={graphs:<5} pdl={pdl:<5} fusion={fusion:<5} kv={:<10} mmvq_max_batch={thr:<3} b1_k_split_min_k={:<20} b1_pair_min_rows_per_k={:<20} npl={:<4} md5={} S_TG={:.1}",
                if paged { "paged" } else { "contiguous" },
                ks,
                pr,
                r.npl,
                r.md5,
                r.s_tg.median
            );
            results.push(serde_json::json!({"graphs": graphs, "pdl": pdl, "fusion": fusion, "paged_kv": paged, "mmvq_max_batch": thr, "mmvq_b1_k_split_min_k": ks, "mmvq_b1_pair_min_rows_per_k": pr, "npl": r.npl, "md5": r.md5, "s_tg": r.s_tg.median}));
        }
    }
    let mut ok = true;
    for n in &a.npl {
        let md5s: std::collections::BTreeSet<&str> = results
            .iter()
            .filter(|r| r["npl"] == *n)
            .filter_map(|r| r["md5"].as_str())
            .collect();
        println!(
            "npl {n}: {} distinct md5 over {} lever settings{}",
            md5s.len(),
            results.iter().filter(|r| r["npl"] == *n).count(),
            if md5s.len() == 1 {
                " (identical)"
            } else {
                " (DIFFER)"
            }
        );
        ok &= md5s.len() == 1;
    }
    write_json(
        &a.json,
        &serde_json::json!({"model": cfg, "weights": a.model.weights, "results": results, "identical": ok}),
    )?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_matrix_runs_every_threshold_then_the_forced_entries() {
        let d = DispatchPolicy::default();
        let m = matrix(&[0, 4, 8, 16, 256]);
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
}
