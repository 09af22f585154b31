//! `gapscope-engine levers`: every lever setting on the same prompts; the greedy md5 must not
//! change (exit 1 when it does).

use crate::args::{ModelArgs, check_shape, load, write_json};
use crate::env::open_device;
use gapscope_engine::Result;
use gapscope_engine::bench::{self, BenchSettings};
use gapscope_engine::cuda::{Capacity, CudaBackend, Timing};
use gapscope_engine::lever_matrix::{hybrid_command_matrix, levers_command_matrix};
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

pub fn run(a: LeversArgs) -> Result<ExitCode> {
    check_shape(&a.npl, a.npp, a.ntg, 1)?;
    let (cfg, w) = load(&a.model)?;
    let cap = Capacity::for_bench(&a.npl, a.npp, a.ntg);
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
    // The matrix (`lever_matrix::levers_command_matrix`): PDL follows the graphs lever, so any
    // PDL effect on the output shows as a second md5. A hybrid model adds every setting of the
    // DeltaNet levers, with graphs on and off.
    let hybrid = cfg.hybrid.is_some();
    let mut matrix = levers_command_matrix(&a.thresholds);
    if hybrid {
        matrix.extend(hybrid_command_matrix());
    }
    for lv in matrix {
        let (graphs, pdl, fusion, paged) = (lv.graphs, lv.pdl, lv.fusion, lv.paged_kv);
        let d = lv.dispatch;
        let (thr, ks, pr) = (
            d.mmvq_max_batch,
            d.mmvq_b1_k_split_min_k,
            d.mmvq_b1_pair_min_rows_per_k,
        );
        let dev = open_device(a.device)?;
        let mut be = CudaBackend::new(dev, &cfg, &w, lv, cap, Timing::Off)?;
        let rows = bench::run(&mut be, &settings, None, |_| Ok(()), |_| {})?;
        let h = lv.hybrid;
        let hybrid_cols = if hybrid {
            format!(
                " state_update={:<7} state_read={:<9} out_proj={}",
                h.state_update.name(),
                h.state_read.name(),
                h.out_proj.name()
            )
        } else {
            String::new()
        };
        for r in rows {
            println!(
                "graphs={graphs:<5} pdl={pdl:<5} fusion={fusion:<5} kv={:<10} mmvq_max_batch={thr:<3} b1_k_split_min_k={:<20} b1_pair_min_rows_per_k={:<20}{hybrid_cols} npl={:<4} md5={} S_TG={:.1}",
                if paged { "paged" } else { "contiguous" },
                ks,
                pr,
                r.npl,
                r.md5,
                r.s_tg.median
            );
            let mut row = serde_json::json!({"graphs": graphs, "pdl": pdl, "fusion": fusion, "paged_kv": paged, "mmvq_max_batch": thr, "mmvq_b1_k_split_min_k": ks, "mmvq_b1_pair_min_rows_per_k": pr, "npl": r.npl, "md5": r.md5, "s_tg": r.s_tg.median});
            if hybrid {
                row["hybrid"] = serde_json::json!(h);
            }
            results.push(row);
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
