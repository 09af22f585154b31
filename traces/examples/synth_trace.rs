//! Writes a synthetic decode trace of N kernels straight to the native format, streaming in
//! chunks so memory stays flat at any N. Used by the scale benchmarks in docs/BENCHMARKS.md.
//!
//! cargo run --release -p gapscope-traces --example synth_trace -- 10000000 /tmp/10m.gst
//!
//! A third argument, DISTINCT, spreads the layers' GEMV calls over DISTINCT kernel names
//! (`gemv_bf16_v0`, `gemv_bf16_v1`, ...), for the explorer's kernel-table benchmark.
//!
//! `--rank R --world W` (after the positional arguments) writes rank R of a tensor-parallel
//! run of W ranks: an NCCL all-reduce after each layer's attention and MLP, which every rank
//! leaves at the same instant and enters after its own delay (0–3 µs, and 40 µs more on the
//! last rank before each step's first one), and the rank in the manifest, as
//! `gapscope-record` writes it. The ranks' other kernels and times are the same.

use std::path::PathBuf;

use gapscope_traces::*;

/// One decode step of a 32-layer model in the engine's kernel names, with durations in ns.
const LAYER: &[(&str, i64)] = &[
    ("rms_norm_bf16", 2_000),
    ("gemv_bf16", 18_000),
    ("rope_bf16", 1_500),
    ("kv_append_bf16", 1_200),
    ("attn_decode_paged_bf16", 9_000),
    ("gemv_bf16", 12_000),
    ("residual_add_bf16", 1_000),
    ("rms_norm_bf16", 2_000),
    ("gemv_bf16", 60_000),
    ("swiglu_bf16", 2_500),
    ("gemv_bf16", 30_000),
    ("residual_add_bf16", 1_000),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .ok_or("usage: synth_trace N_KERNELS OUT.gst [DISTINCT]")?
        .parse()?;
    let out = PathBuf::from(
        args.next()
            .ok_or("usage: synth_trace N_KERNELS OUT.gst [DISTINCT]")?,
    );
    let rest: Vec<String> = args.collect();
    let flag = |f: &str| -> Result<Option<u32>, Box<dyn std::error::Error>> {
        match rest.iter().position(|a| a == f) {
            Some(i) => Ok(Some(
                rest.get(i + 1).ok_or("a flag without a value")?.parse()?,
            )),
            None => Ok(None),
        }
    };
    let rank = flag("--rank")?;
    let world = flag("--world")?.unwrap_or(1);
    let distinct: usize = match rest.first() {
        Some(d) if !d.starts_with("--") => d.parse()?,
        _ => 0,
    };
    let mut strings = StringTable::new();
    let names: Vec<u32> = LAYER.iter().map(|(n, _)| strings.intern(n)).collect();
    let variants: Vec<u32> = (0..distinct)
        .map(|v| strings.intern(&format!("gemv_bf16_v{v}")))
        .collect();
    let mut next_variant = 0usize;
    let embed = strings.intern("get_rows_bf16");
    let head = strings.intern("gemv_bf16");
    let argmax = strings.intern("argmax_f32");
    let step_name = strings.intern("decode");
    let allreduce = strings
        .intern("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
    let mut m = Manifest::new(SourceFormat::Synthetic);
    m.notes.push(format!("synthetic decode trace, {n} kernels"));
    if let Some(r) = rank {
        m.ranks = vec![r];
        m.world_size = Some(world);
    }
    let mut w = TraceWriter::create(&out, m)?;
    w.append_strings(&strings)?;
    let mut kernels = KernelTable::default();
    let mut markers = MarkerTable::default();
    let mut now: i64 = 1_000_000;
    let mut written: u64 = 0;
    let mut step: i64 = 0;
    let mut rng: u64 = 0x2545_f491_4f6c_dd1d;
    let mut jitter = |base: i64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        base + (rng % 200) as i64
    };
    // Each rank's own arrival delays.
    let mut arng: u64 = 0x9e37_79b9_7f4a_7c15 ^ u64::from(rank.unwrap_or(0) + 1);
    let mut arrive = move || {
        arng ^= arng << 13;
        arng ^= arng >> 7;
        arng ^= arng << 17;
        (arng % 3_000) as i64
    };
    let last = rank.is_some_and(|r| r + 1 == world);
    while written < n {
        let step_start = now;
        let mut push = |name: u32, d: i64, now: &mut i64, layer: i32| {
            kernels.push(KernelRow {
                stream: 7,
                correlation: written,
                name,
                gpu_start_ns: *now,
                gpu_end_ns: *now + d,
                grid_x: 132,
                block_x: 256,
                layer,
                ..Default::default()
            });
            *now += d + 800;
            written += 1;
        };
        push(embed, jitter(1_500), &mut now, -1);
        for layer in 0..32 {
            for (i, &(_, d)) in LAYER.iter().enumerate() {
                let name = if !variants.is_empty() && LAYER[i].0 == "gemv_bf16" {
                    next_variant += 1;
                    variants[next_variant % variants.len()]
                } else {
                    names[i]
                };
                push(name, jitter(d), &mut now, layer);
                // An all-reduce after the attention's and the MLP's last projections.
                if rank.is_some() && (i == 5 || i == 10) {
                    let late = if last && layer == 0 && i == 5 {
                        40_000
                    } else {
                        0
                    };
                    let end = now + 49_000;
                    now += arrive() + late;
                    push(allreduce, end - now, &mut now, layer);
                }
            }
        }
        push(head, jitter(250_000), &mut now, -1);
        push(argmax, jitter(3_000), &mut now, -1);
        markers.push(MarkerRow {
            name: step_name,
            source: MarkerSource::Engine as u8,
            phase: Phase::Decode as u8,
            gpu_start_ns: step_start,
            gpu_end_ns: now,
            step,
            batch_size: 1,
            tokens: 1,
            ..Default::default()
        });
        step += 1;
        now += 20_000; // host gap between steps
        if kernels.len() >= 1 << 20 {
            w.append_kernels(&kernels)?;
            kernels.clear();
        }
    }
    w.append_kernels(&kernels)?;
    w.append_markers(&markers)?;
    w.finish()?;
    eprintln!("wrote {} ({written} kernels, {step} steps)", out.display());
    Ok(())
}
