//! `gapscope-record`: runs any CUDA program with the gapscope CUPTI injection library and
//! writes one native trace per recorded process, with NVML telemetry in the same trace.
//!
//! ```text
//! gapscope-record -o run.gst -- python3 decode.py --steps 32
//! gapscope-record --capture-range cudaProfilerApi -o steps.gst -- ./bench
//! ```
//!
//! The child's exit status is passed through (128 + N when it was killed by signal N), so
//! the recorder can wrap programs in scripts and CI without hiding their failures.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use gapscope_profiler::assemble::{AssembleSettings, AssembleSummary, CaptureRange, assemble};
use gapscope_profiler::cupti_lib::{CuptiLib, find_cupti};
use gapscope_profiler::inject::{Collect, InjectSettings};
use gapscope_profiler::nvml::{NvmlSource, Sampler, realtime_ns};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CaptureRangeArg {
    /// Record the whole run.
    None,
    /// Keep only what runs between cudaProfilerStart and cudaProfilerStop.
    #[value(name = "cudaProfilerApi")]
    CudaProfilerApi,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CollectArg {
    /// Switch CUPTI's activity kinds on when CUDA initialises (before any module loads).
    Init,
    /// Attach CUPTI at initialisation but switch the kinds on at cudaProfilerStart and off at
    /// cudaProfilerStop; needs --capture-range cudaProfilerApi.
    Range,
    /// Leave CUPTI out of the program until it calls cudaProfilerStart through a shared
    /// libcudart (preloaded interposer), then attach, as torch.profiler attaches at
    /// profile(); needs --capture-range cudaProfilerApi.
    Late,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ApiArg {
    Both,
    Runtime,
    Driver,
    None,
}

/// Record the GPU activity of any CUDA program (kernels, copies, sets, launches, NVTX
/// ranges) through CUPTI, with NVML telemetry, into a gapscope native trace.
#[derive(Debug, Parser)]
#[command(
    name = "gapscope-record",
    version,
    after_help = "Examples:\n  gapscope-record -o run.gst -- python3 decode.py\n  gapscope-record --capture-range cudaProfilerApi -o steps.gst -- ./bench --steps 64\n  gapscope report run.gst"
)]
struct Args {
    /// The trace to write (a directory). Other recorded processes (children that used CUDA)
    /// get OUTPUT with `.pidN` before the extension.
    #[arg(short, long, default_value = "gapscope-record.gst")]
    output: PathBuf,
    /// libcupti to use (CUDA 13.0). Default: search $CUDA_HOME, /usr/local/cuda,
    /// LD_LIBRARY_PATH, the system library directories and pip's nvidia-cuda-cupti.
    #[arg(long, value_name = "PATH")]
    cupti_lib: Option<PathBuf>,
    /// The injection library. Default: libgapscope_profiler.so next to this executable.
    #[arg(long, value_name = "PATH")]
    inject_lib: Option<PathBuf>,
    /// NVML sampling interval; 0 turns telemetry off.
    #[arg(long, default_value_t = 100, value_name = "MS")]
    nvml_interval_ms: u64,
    /// Which host API calls to record: runtime, driver, both or none. Fewer API records
    /// lower the cost on launch-bound programs (PyTorch launches through the runtime; cudarc
    /// programs such as gapscope-engine through the driver).
    #[arg(long, value_enum, default_value = "both")]
    api: ApiArg,
    /// Do not record memory copies and sets.
    #[arg(long)]
    no_memops: bool,
    /// Leave out what starts in the first S seconds after the program starts.
    #[arg(long, value_name = "S")]
    delay: Option<f64>,
    /// Keep only S seconds (after --delay).
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// Which part of the run to keep.
    #[arg(long, value_enum, default_value = "none")]
    capture_range: CaptureRangeArg,
    /// When CUPTI starts collecting. `init` traces from CUDA's initialisation and cuts the
    /// capture range out afterwards; `range` switches the activity kinds at the range; `late`
    /// attaches CUPTI itself at cudaProfilerStart, as torch.profiler does, for programs with
    /// a shared libcudart (docs/RECORD.md, "When collection starts").
    #[arg(long, value_enum, default_value = "init")]
    collect: CollectArg,
    /// How often the injection library hands partly filled CUPTI buffers over, bounding
    /// what a crash can lose; 0 = only when buffers fill and at exit.
    #[arg(long, default_value_t = 200, value_name = "MS")]
    flush_ms: u64,
    /// Size of each CUPTI activity buffer.
    #[arg(long, default_value_t = 4, value_name = "MB")]
    buffer_mb: usize,
    /// Keep the raw spool files next to the output.
    #[arg(long)]
    keep_spool: bool,
    /// Print only errors.
    #[arg(short, long)]
    quiet: bool,
    /// Write the trace from a spool file kept earlier (--keep-spool, or left behind when the
    /// recorder itself was killed) instead of running a program.
    #[arg(long, value_name = "SPOOL", conflicts_with = "command")]
    from_spool: Option<PathBuf>,
    /// Print the CUPTI record layout this build decodes and exit (compared with the
    /// toolkit's header by scripts/record/layout_check.c).
    #[arg(long, hide = true)]
    print_layout: bool,
    /// The program to record and its arguments (after `--`).
    #[arg(
        required_unless_present_any = ["print_layout", "from_spool"],
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<String>,
}

/// Exit status for the recorder's own failures before the child ran (the child's status is
/// passed through otherwise).
const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    let args = Args::parse();
    if args.print_layout {
        for l in gapscope_profiler::layout::layout_lines() {
            println!("{l}");
        }
        return ExitCode::SUCCESS;
    }
    match run(&args) {
        Ok(code) => code,
        Err((msg, code)) => {
            eprintln!("gapscope-record: error: {msg}");
            ExitCode::from(code)
        }
    }
}

fn secs_to_ns(s: Option<f64>, what: &str) -> Result<Option<i64>, (String, u8)> {
    match s {
        None => Ok(None),
        Some(v) if v.is_finite() && v >= 0.0 => Ok(Some((v * 1e9) as i64)),
        Some(v) => Err((
            format!("--{what} must be a non-negative number of seconds, got {v}"),
            EXIT_USAGE,
        )),
    }
}

fn default_inject_lib() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.join("libgapscope_profiler.so"))
}

/// `run.gst` -> `run.pid42.gst`.
fn per_process_output(output: &Path, pid: u32) -> PathBuf {
    let stem = output
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match output.extension() {
        Some(e) => format!("{stem}.pid{pid}.{}", e.to_string_lossy()),
        None => format!("{stem}.pid{pid}"),
    };
    output.with_file_name(name)
}

fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGABRT => "SIGABRT".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGBUS => "SIGBUS".into(),
        libc::SIGFPE => "SIGFPE".into(),
        libc::SIGILL => "SIGILL".into(),
        n => format!("signal {n}"),
    }
}

/// What one written trace holds, and the notes a user should see (the clock note and CUPTI's
/// overhead figures stay in the manifest).
fn print_summary(sum: &AssembleSummary) {
    eprintln!(
        "gapscope-record: wrote {} (pid {}): {} kernels, {} memops, {} API calls, {} NVTX ranges, {} NVML samples, {} dropped{}",
        sum.output.display(),
        sum.pid,
        sum.kernels,
        sum.memops,
        sum.launches,
        sum.markers,
        sum.samples,
        sum.dropped,
        if sum.truncated { "; TRUNCATED" } else { "" }
    );
    for n in sum
        .notes
        .iter()
        .filter(|n| !n.starts_with("times are") && !n.starts_with("CUPTI overhead"))
    {
        eprintln!("gapscope-record:   note: {n}");
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "a binary reads its environment (the injection variables it forwards)"
)]
#[expect(
    clippy::too_many_lines,
    reason = "the launcher's sequence: validate, find CUPTI, launch the child, wait with signals, sample, assemble; each step a block"
)]
fn run(a: &Args) -> Result<ExitCode, (String, u8)> {
    let usage = |m: String| (m, EXIT_USAGE);
    if let Some(spool) = &a.from_spool {
        let s = AssembleSettings {
            capture: CaptureRange {
                profiler_api: a.capture_range == CaptureRangeArg::CudaProfilerApi,
                ..Default::default()
            },
            ..Default::default()
        };
        let sum = assemble(spool, &a.output, &s, None).map_err(|e| usage(e.to_string()))?;
        if !a.quiet {
            print_summary(&sum);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let capture = CaptureRange {
        delay_ns: secs_to_ns(a.delay, "delay")?,
        duration_ns: secs_to_ns(a.duration, "duration")?,
        profiler_api: a.capture_range == CaptureRangeArg::CudaProfilerApi,
    };
    let collect = match a.collect {
        CollectArg::Init => Collect::Init,
        CollectArg::Range => Collect::Range,
        CollectArg::Late => Collect::Late,
    };
    if collect != Collect::Init && !capture.profiler_api {
        return Err(usage(format!(
            "--collect {} switches collection at cudaProfilerStart/Stop; add --capture-range cudaProfilerApi",
            collect.as_str()
        )));
    }
    if capture.profiler_api && a.api == ApiArg::None && collect == Collect::Init {
        return Err(usage(
            "--capture-range cudaProfilerApi needs the API records that hold the cudaProfilerStart/Stop calls; drop --api none".into(),
        ));
    }
    if a.buffer_mb == 0 || a.buffer_mb > 256 {
        return Err(usage(format!(
            "--buffer-mb must be between 1 and 256, got {}",
            a.buffer_mb
        )));
    }
    if a.output.exists() && !gapscope_traces::is_native_trace(&a.output) {
        let empty_dir = a.output.is_dir()
            && std::fs::read_dir(&a.output)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
        if !empty_dir {
            return Err(usage(format!(
                "{}: exists and is not a gapscope trace; refusing to overwrite it",
                a.output.display()
            )));
        }
    }
    let inject = a
        .inject_lib
        .clone()
        .or_else(default_inject_lib)
        .unwrap_or_default();
    if !inject.is_file() {
        return Err(usage(format!(
            "injection library {} not found; build it with `cargo build --release -p gapscope-profiler` (it sits next to gapscope-record) or pass --inject-lib PATH",
            inject.display()
        )));
    }
    let inject = inject.canonicalize().unwrap_or(inject);
    if collect == Collect::Late {
        let p = inject.to_string_lossy();
        if p.contains(':') || p.contains(' ') {
            return Err(usage(format!(
                "--collect late preloads the injection library, and LD_PRELOAD cannot name {p} (a ':' or space in the path); move it or pass --inject-lib"
            )));
        }
    }
    let env = |k: &str| std::env::var(k).ok();
    let cupti = match &a.cupti_lib {
        Some(p) => CuptiLib::load(p).and_then(|l| l.check_version().map(|_| l)),
        None => find_cupti(&env),
    }
    .map_err(|e| usage(e.to_string()))?;
    let cupti_path = cupti.path.canonicalize().unwrap_or(cupti.path.clone());
    drop(cupti);

    let out_dir = a
        .output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(out_dir).map_err(|e| usage(format!("{}: {e}", out_dir.display())))?;
    let spool_dir = out_dir.join(format!(
        ".{}.spool-{}",
        a.output
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    std::fs::create_dir_all(&spool_dir).map_err(|e| {
        usage(format!(
            "cannot create spool directory {}: {e}",
            spool_dir.display()
        ))
    })?;
    let spool_dir = spool_dir.canonicalize().unwrap_or(spool_dir);
    let settings = InjectSettings {
        spool_dir: spool_dir.clone(),
        cupti_lib: cupti_path.clone(),
        memops: !a.no_memops,
        buffer_bytes: a.buffer_mb << 20,
        flush_ms: a.flush_ms,
        runtime_api: matches!(a.api, ApiArg::Both | ApiArg::Runtime),
        driver_api: matches!(a.api, ApiArg::Both | ApiArg::Driver),
        collect,
        // Each recorded process reads its own from the environment its launcher gave it.
        rank: None,
        local_rank: None,
        world_size: None,
    };

    let (sampler, no_nvml) = if a.nvml_interval_ms == 0 {
        (
            None,
            Some("no NVML: telemetry turned off (--nvml-interval-ms 0)".to_owned()),
        )
    } else {
        match NvmlSource::open() {
            Ok(src) => (
                Some(Sampler::start(
                    Box::new(src),
                    Duration::from_millis(a.nvml_interval_ms),
                )),
                None,
            ),
            Err(e) => (None, Some(e)),
        }
    };

    let mut cmd = Command::new(&a.command[0]);
    cmd.args(&a.command[1..]);
    for (k, v) in settings.to_env() {
        cmd.env(k, v);
    }
    cmd.env("CUDA_INJECTION64_PATH", &inject);
    if settings.collect == Collect::Late {
        // The interposed cudaProfilerStart/Stop (late_attach.rs). NVTX stays out: its
        // injection would load CUPTI at the program's first NVTX call.
        let mut pre = inject.as_os_str().to_owned();
        if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
            pre.push(":");
            pre.push(old);
        }
        cmd.env("LD_PRELOAD", pre);
    } else if std::env::var_os("NVTX_INJECTION64_PATH").is_none() {
        cmd.env("NVTX_INJECTION64_PATH", &cupti_path);
    }
    let t0 = Instant::now();
    let launch_realtime_ns = realtime_ns();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            if let Some(s) = sampler {
                s.stop();
            }
            let _ = std::fs::remove_dir_all(&spool_dir);
            let (what, code) = match e.kind() {
                std::io::ErrorKind::NotFound => ("not found".to_owned(), 127),
                std::io::ErrorKind::PermissionDenied => ("permission denied".to_owned(), 126),
                _ => (e.to_string(), 126),
            };
            return Err((format!("cannot run `{}`: {what}", a.command[0]), code));
        }
    };
    let child_pid = child.id();
    // Ctrl-C reaches the child through the terminal; the recorder stays to write the trace.
    // SAFETY: setting a signal disposition to SIG_IGN has no preconditions.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    let status = child
        .wait()
        .map_err(|e| (format!("waiting for the child: {e}"), EXIT_USAGE))?;
    let wall = t0.elapsed();
    let telemetry = sampler.map(|s| s.stop());

    use std::os::unix::process::ExitStatusExt;
    let (exit_code, exit_text, crashed) = match (status.code(), status.signal()) {
        (Some(c), _) => (c.clamp(0, 255) as u8, format!("exit {c}"), false),
        (None, Some(sig)) => (
            (128 + sig).clamp(0, 255) as u8,
            format!("killed by {}", signal_name(sig)),
            true,
        ),
        _ => (1, "ended".to_owned(), true),
    };

    let mut spools: Vec<(u32, PathBuf)> = std::fs::read_dir(&spool_dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let p = e.path();
                    let pid = p
                        .file_name()?
                        .to_str()?
                        .strip_suffix(".spool")?
                        .parse()
                        .ok()?;
                    Some((pid, p))
                })
                .collect()
        })
        .unwrap_or_default();
    spools.sort_by_key(|(pid, _)| (*pid != child_pid, *pid));
    if spools.is_empty() {
        let _ = std::fs::remove_dir_all(&spool_dir);
        eprintln!(
            "gapscope-record: `{}` did no CUDA work (the injection library was never loaded), so no trace was written; it ended with {exit_text}",
            a.command.join(" ")
        );
        return Ok(ExitCode::from(exit_code));
    }
    let mut failed = false;
    let command_line = a.command.join(" ");
    for (i, (pid, spool)) in spools.iter().enumerate() {
        let out = if i == 0 {
            a.output.clone()
        } else {
            per_process_output(&a.output, *pid)
        };
        let is_child = *pid == child_pid;
        let s = AssembleSettings {
            capture: capture.clone(),
            launch_realtime_ns,
            command_line: if is_child {
                command_line.clone()
            } else {
                String::new()
            },
            exit: is_child.then(|| exit_text.clone()),
            crashed: is_child && crashed,
            no_nvml: no_nvml.clone(),
        };
        match assemble(spool, &out, &s, telemetry.as_ref()) {
            Ok(sum) => {
                if !a.quiet {
                    print_summary(&sum);
                }
            }
            Err(e) => {
                failed = true;
                eprintln!("gapscope-record: could not write the trace of pid {pid}: {e}");
            }
        }
    }
    if a.keep_spool || failed {
        eprintln!("gapscope-record: spool kept in {}", spool_dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&spool_dir);
    }
    if !a.quiet {
        eprintln!(
            "gapscope-record: `{}` ran {:.2} s and ended with {exit_text}",
            a.command.join(" "),
            wall.as_secs_f64()
        );
    }
    Ok(ExitCode::from(exit_code))
}
