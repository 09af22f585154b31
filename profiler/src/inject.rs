//! The CUPTI injection library. CUDA loads it into the recorded process through
//! `CUDA_INJECTION64_PATH` and calls [`InitializeInjection`] on its first driver call. From
//! then on, every completed CUPTI activity buffer is copied into the process's spool file
//! with one `write`, so a crash loses only the buffers still being filled; a flusher thread
//! hands partly filled buffers over every `flush_ms` to keep that loss small.

use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, c_char, c_int, c_void};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::collect_range::{
    RangeCollector, Switch, callback_site, profiler_callbacks, switch_kinds,
};
use crate::cupti_lib::{CUPTI_ERROR_MAX_LIMIT_REACHED, CuptiLib};
use crate::layout::{self, kind};
use crate::spool::{FrameBuf, SpoolEnd, SpoolHeader, tag};

/// What the launcher tells the injection library, through the child's environment (its
/// only channel). One struct writes and reads the variables, so both sides agree.
#[derive(Debug, Clone, PartialEq)]
pub struct InjectSettings {
    pub spool_dir: PathBuf,
    pub cupti_lib: PathBuf,
    pub memops: bool,
    pub buffer_bytes: usize,
    pub flush_ms: u64,
    /// Record CUDA runtime API calls (launch correlation, cudaProfilerStart/Stop).
    pub runtime_api: bool,
    /// Record CUDA driver API calls (programs that launch through the driver, as cudarc
    /// does).
    pub driver_api: bool,
    /// When CUPTI starts collecting.
    pub collect: Collect,
    /// The process's place in a distributed run, as its launcher (torchrun, vLLM, SGLang)
    /// set `RANK`, `LOCAL_RANK` and `WORLD_SIZE`; `None` where unset or not a number.
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
}

/// When CUPTI starts collecting (`gapscope-record --collect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Collect {
    /// Every kind on from CUDA's initialisation; the capture range is cut out afterwards.
    #[default]
    Init,
    /// CUPTI attached at initialisation, the kinds switched on at cudaProfilerStart and off
    /// at cudaProfilerStop (callback API): works for any program.
    Range,
    /// CUPTI untouched until the program calls cudaProfilerStart through a shared libcudart
    /// (interposed with LD_PRELOAD), then attached as torch.profiler attaches at `profile()`,
    /// after the program's modules have loaded.
    Late,
}

impl Collect {
    const ALL: [Collect; 3] = [Collect::Init, Collect::Range, Collect::Late];

    /// The name the launcher passes, the spool header records and `--collect` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Collect::Init => "init",
            Collect::Range => "range",
            Collect::Late => "late",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

impl InjectSettings {
    pub const SPOOL_DIR: &'static str = "GAPSCOPE_SPOOL_DIR";
    pub const CUPTI_LIB: &'static str = "GAPSCOPE_CUPTI_LIB";
    pub const MEMOPS: &'static str = "GAPSCOPE_MEMOPS";
    pub const BUFFER_BYTES: &'static str = "GAPSCOPE_BUFFER_BYTES";
    pub const FLUSH_MS: &'static str = "GAPSCOPE_FLUSH_MS";
    pub const API: &'static str = "GAPSCOPE_API";
    pub const COLLECT: &'static str = "GAPSCOPE_COLLECT";

    pub fn to_env(&self) -> Vec<(&'static str, String)> {
        vec![
            (Self::SPOOL_DIR, self.spool_dir.display().to_string()),
            (Self::CUPTI_LIB, self.cupti_lib.display().to_string()),
            (Self::MEMOPS, if self.memops { "1" } else { "0" }.to_owned()),
            (Self::BUFFER_BYTES, self.buffer_bytes.to_string()),
            (Self::FLUSH_MS, self.flush_ms.to_string()),
            (
                Self::API,
                match (self.runtime_api, self.driver_api) {
                    (true, true) => "runtime,driver",
                    (true, false) => "runtime",
                    (false, true) => "driver",
                    (false, false) => "none",
                }
                .to_owned(),
            ),
            (Self::COLLECT, self.collect.as_str().to_owned()),
        ]
    }

    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, String> {
        let need = |k: &str| {
            env(k)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| format!("{k} is not set"))
        };
        let num = |k: &str, d: u64| -> Result<u64, String> {
            match env(k) {
                None => Ok(d),
                Some(v) => v.parse().map_err(|_| format!("{k}={v:?} is not a number")),
            }
        };
        Ok(Self {
            spool_dir: PathBuf::from(need(Self::SPOOL_DIR)?),
            cupti_lib: PathBuf::from(need(Self::CUPTI_LIB)?),
            memops: env(Self::MEMOPS).as_deref() != Some("0"),
            buffer_bytes: (num(Self::BUFFER_BYTES, 4 << 20)? as usize).clamp(64 << 10, 256 << 20),
            flush_ms: num(Self::FLUSH_MS, 200)?,
            runtime_api: env(Self::API).is_none_or(|v| v.split(',').any(|x| x == "runtime")),
            driver_api: env(Self::API).is_none_or(|v| v.split(',').any(|x| x == "driver")),
            collect: match env(Self::COLLECT) {
                None => Collect::Init,
                Some(v) => Collect::from_name(&v).ok_or_else(|| {
                    format!("{}={v:?} is none of init, range, late", Self::COLLECT)
                })?,
            },
            rank: whole(env("RANK")),
            local_rank: whole(env("LOCAL_RANK")),
            world_size: whole(env("WORLD_SIZE")),
        })
    }

    /// The kinds to enable when CUDA initialises: all of them, only the device records when
    /// collection waits for the capture range, none when CUPTI attaches late.
    pub fn kinds_at_init(&self) -> Vec<u32> {
        match self.collect {
            Collect::Init => self.kinds(),
            Collect::Range => vec![kind::DEVICE],
            Collect::Late => Vec::new(),
        }
    }

    /// The kinds switched on at cudaProfilerStart and off at cudaProfilerStop.
    pub fn kinds_in_range(&self) -> Vec<u32> {
        match self.collect {
            Collect::Init => Vec::new(),
            Collect::Range => self
                .kinds()
                .into_iter()
                .filter(|&k| k != kind::DEVICE)
                .collect(),
            Collect::Late => self.kinds(),
        }
    }

    /// Every kind recorded, in order.
    pub fn kinds(&self) -> Vec<u32> {
        let mut k = vec![
            kind::DEVICE,
            kind::CONCURRENT_KERNEL,
            kind::MARKER,
            kind::OVERHEAD,
        ];
        if self.runtime_api {
            k.push(kind::RUNTIME);
        }
        if self.driver_api {
            k.push(kind::DRIVER);
        }
        if self.memops {
            k.extend([kind::MEMCPY, kind::MEMSET]);
        }
        k
    }
}

pub(crate) struct Injector {
    pub(crate) cupti: CuptiLib,
    pub(crate) pid: u32,
    buffer_bytes: usize,
    flush_ms: u64,
    /// `--collect late`: CUPTI waits for the program's cudaProfilerStart (late_attach.rs).
    pub(crate) late: bool,
    /// CUPTI's buffer callbacks are registered (at initialisation, or for `--collect late`
    /// at the first cudaProfilerStart).
    pub(crate) attached: std::sync::atomic::AtomicBool,
    file: Mutex<File>,
    names: Mutex<Names>,
    buffers: AtomicU64,
    records: AtomicU64,
    skipped: AtomicU64,
}

#[derive(Default)]
struct Names {
    ids: HashMap<Vec<u8>, u64>,
    api: HashSet<(u32, u32)>,
}

pub(crate) static INJECTOR: OnceLock<Injector> = OnceLock::new();

/// Serialises `Injector::attach`.
static ATTACH: Mutex<()> = Mutex::new(());

/// Entry point CUDA calls in the recorded process. Returns 1 on success; on failure it
/// prints one line and lets the program run unrecorded.
#[unsafe(no_mangle)]
pub extern "C" fn InitializeInjection() -> c_int {
    match std::panic::catch_unwind(init) {
        Ok(Ok(())) => 1,
        Ok(Err(msg)) => {
            eprintln!("gapscope-record (injection): {msg}; this process is not recorded");
            0
        }
        Err(_) => {
            eprintln!(
                "gapscope-record (injection): internal error during initialisation; this process is not recorded"
            );
            0
        }
    }
}

fn clock_ns(id: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

fn calibration(fb: &mut FrameBuf, cupti: &CuptiLib) {
    let r0 = clock_ns(libc::CLOCK_REALTIME);
    let m0 = clock_ns(libc::CLOCK_MONOTONIC);
    let c = cupti.timestamp();
    let r1 = clock_ns(libc::CLOCK_REALTIME);
    let m1 = clock_ns(libc::CLOCK_MONOTONIC);
    fb.calibration(c, r0 + (r1 - r0) / 2, m0 + (m1 - m0) / 2);
}

#[expect(
    clippy::disallowed_methods,
    reason = "the injection library's only channel is the environment the launcher sets"
)]
fn init() -> Result<(), String> {
    let s = InjectSettings::from_env(&|k| std::env::var(k).ok())?;
    let pid = std::process::id();
    let path = s.spool_dir.join(format!("{pid}.spool"));
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| format!("cannot create spool file {}: {e}", path.display()))?;
    let write_note = |file: &mut File, msg: &str| {
        let mut fb = FrameBuf::spool_start();
        fb.frame(tag::NOTE, msg.as_bytes());
        let _ = file.write_all(&fb.bytes);
    };
    let (cupti, version) =
        match CuptiLib::load(&s.cupti_lib).and_then(|l| l.check_version().map(|v| (l, v))) {
            Ok(x) => x,
            Err(e) => {
                write_note(&mut file, &e.to_string());
                return Err(e.to_string());
            }
        };
    let mut fb = FrameBuf::spool_start();
    let cmdline = std::fs::read("/proc/self/cmdline")
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    fb.json(
        tag::HEADER,
        &SpoolHeader {
            pid,
            // SAFETY: getppid has no preconditions.
            ppid: unsafe { libc::getppid() } as u32,
            cupti_api_version: version,
            cupti_path: s.cupti_lib.display().to_string(),
            exe: std::fs::read_link("/proc/self/exe")
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            command_line: cmdline,
            kinds: s.kinds(),
            collect: s.collect.as_str().to_owned(),
            rank: s.rank,
            local_rank: s.local_rank,
            world_size: s.world_size,
        },
    );
    let late = s.collect == Collect::Late;
    file.write_all(&fb.bytes)
        .map_err(|e| format!("cannot write spool file {}: {e}", path.display()))?;

    let inj = Injector {
        cupti,
        pid,
        buffer_bytes: s.buffer_bytes,
        flush_ms: s.flush_ms,
        late,
        attached: std::sync::atomic::AtomicBool::new(false),
        file: Mutex::new(file),
        names: Mutex::new(Names::default()),
        buffers: AtomicU64::new(0),
        records: AtomicU64::new(0),
        skipped: AtomicU64::new(0),
    };
    let inj = INJECTOR.get_or_init(|| inj);
    if late {
        // Nothing touches CUPTI until the program's cudaProfilerStart (late_attach.rs).
        let _ = RANGE.set(RangeCollector::new(
            s.kinds_in_range(),
            Vec::new(),
            Vec::new(),
        ));
    } else {
        inj.attach()?;
        let mut notes = Vec::new();
        let mut at_init = s.kinds_at_init();
        if s.collect == Collect::Range
            && let Err(e) = subscribe_range(&inj.cupti, s.kinds_in_range())
        {
            notes.push(format!(
                "--collect range: {e}; collecting from initialisation instead"
            ));
            at_init = s.kinds();
        }
        notes.extend(switch_kinds(&inj.cupti, &at_init, Switch::On, ""));
        if !notes.is_empty() {
            let mut fb = FrameBuf::default();
            for n in &notes {
                fb.frame(tag::NOTE, n.as_bytes());
            }
            inj.write(&fb.bytes);
        }
    }
    // SAFETY: registering a plain extern "C" fn.
    unsafe { libc::atexit(at_exit) };
    Ok(())
}

pub(crate) static RANGE: OnceLock<RangeCollector> = OnceLock::new();

/// Subscribes to the profiler start/stop calls so `kinds` follow the capture range.
fn subscribe_range(cupti: &CuptiLib, kinds: Vec<u32>) -> Result<(), String> {
    let (start, stop) = profiler_callbacks(cupti);
    if start.is_empty() || stop.is_empty() {
        return Err("this CUPTI names no cudaProfilerStart/Stop callbacks".into());
    }
    let rc = RANGE.get_or_init(|| RangeCollector::new(kinds, start, stop));
    let mut handle: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid out-pointer; range_callback has CUpti_CallbackFunc's signature.
    let r = unsafe { (cupti.subscribe)(&mut handle, range_callback, std::ptr::null_mut()) };
    if r != 0 {
        return Err(format!("cuptiSubscribe: {}", cupti.result_string(r)));
    }
    for &(domain, cbid) in rc.start.iter().chain(&rc.stop) {
        // SAFETY: handle from cuptiSubscribe; ids from cuptiGetCallbackName.
        let r = unsafe { (cupti.enable_callback)(1, handle, domain, cbid) };
        if r != 0 {
            // Nothing half-subscribed may switch the kinds of the fallback (all from init).
            // SAFETY: the handle cuptiSubscribe gave.
            unsafe { (cupti.unsubscribe)(handle) };
            return Err(format!(
                "cuptiEnableCallback({domain}, {cbid}): {}",
                cupti.result_string(r)
            ));
        }
    }
    Ok(())
}

unsafe extern "C" fn range_callback(
    _userdata: *mut c_void,
    domain: u32,
    cbid: u32,
    cbdata: *const c_void,
) {
    let _ = std::panic::catch_unwind(|| {
        let (Some(inj), Some(rc)) = (INJECTOR.get(), RANGE.get()) else {
            return;
        };
        // SAFETY: CUPTI passes API callback data for the API domains subscribed to.
        let Some(site) = (unsafe { callback_site(cbdata) }) else {
            return;
        };
        if let Some(want) = rc.wanted(domain, cbid, site) {
            rc.switch_with(want, |sw| {
                let fb = rc.apply(&inj.cupti, sw);
                inj.write(&fb.bytes);
                true
            });
        }
    });
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let Some(inj) = INJECTOR.get() else { return };
        if std::process::id() != inj.pid || !inj.attached.load(Ordering::Acquire) {
            return;
        }
        // SAFETY: plain call; 1 = CUPTI_ACTIVITY_FLAG_FLUSH_FORCED.
        unsafe { (inj.cupti.flush_all)(1) };
        let mut fb = FrameBuf::default();
        calibration(&mut fb, &inj.cupti);
        fb.json(
            tag::END,
            &SpoolEnd {
                buffers: inj.buffers.load(Ordering::Relaxed),
                records: inj.records.load(Ordering::Relaxed),
                skipped: inj.skipped.load(Ordering::Relaxed),
            },
        );
        inj.write(&fb.bytes);
    });
}

const BUFFER_ALIGN: usize = 8;

/// Completed buffers kept for reuse, as addresses (all of `buffer_bytes`): handing CUPTI a
/// buffer it has filled before avoids a fresh allocation and its page faults on every
/// request, which CUPTI otherwise reports as "activity buffer request" overhead.
static FREE_BUFFERS: Mutex<Vec<usize>> = Mutex::new(Vec::new());
/// Buffers kept at most; more than this are returned to the allocator.
const MAX_FREE_BUFFERS: usize = 16;

unsafe extern "C" fn buffer_requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_records: *mut usize,
) {
    let bytes = INJECTOR.get().map(|i| i.buffer_bytes).unwrap_or(4 << 20);
    let reused = FREE_BUFFERS.lock().ok().and_then(|mut v| v.pop());
    let p = match reused {
        Some(addr) => addr as *mut u8,
        None => match std::alloc::Layout::from_size_align(bytes, BUFFER_ALIGN) {
            // SAFETY: non-zero size layout.
            Ok(l) => unsafe { std::alloc::alloc(l) },
            Err(_) => std::ptr::null_mut(),
        },
    };
    // SAFETY: CUPTI passes valid out-pointers.
    unsafe {
        *buffer = p;
        *size = if p.is_null() { 0 } else { bytes };
        *max_records = 0;
    }
}

unsafe extern "C" fn buffer_completed(
    ctx: *mut c_void,
    stream: u32,
    buffer: *mut u8,
    size: usize,
    valid: usize,
) {
    let _ = std::panic::catch_unwind(|| {
        if let Some(inj) = INJECTOR.get() {
            inj.drain(ctx, stream, buffer, valid);
        }
    });
    if buffer.is_null() {
        return;
    }
    // Every buffer has the injector's size (set once at start), so any may be reused.
    let same_size = INJECTOR.get().is_some_and(|i| i.buffer_bytes == size);
    if same_size
        && let Ok(mut free) = FREE_BUFFERS.lock()
        && free.len() < MAX_FREE_BUFFERS
    {
        free.push(buffer as usize);
        return;
    }
    if let Ok(l) = std::alloc::Layout::from_size_align(size, BUFFER_ALIGN) {
        // SAFETY: allocated in buffer_requested with this size and alignment.
        unsafe { std::alloc::dealloc(buffer, l) };
    }
}

impl Injector {
    /// Registers CUPTI's buffer callbacks, writes a clock calibration and starts the flusher
    /// thread; once per process.
    pub(crate) fn attach(&self) -> Result<(), String> {
        // One attach at a time; `attached` is set only once CUPTI took the callbacks, so a
        // failed attach leaves the process unrecorded and a later start tries again.
        let _one = match ATTACH.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if self.attached.load(Ordering::Acquire) {
            return Ok(());
        }
        // SAFETY: the callbacks match CUPTI's buffer callback signatures.
        let r = unsafe { (self.cupti.register_callbacks)(buffer_requested, buffer_completed) };
        if r != 0 {
            return Err(format!(
                "cuptiActivityRegisterCallbacks: {}",
                self.cupti.result_string(r)
            ));
        }
        self.attached.store(true, Ordering::Release);
        let mut fb = FrameBuf::default();
        calibration(&mut fb, &self.cupti);
        if self.late {
            // CUPTI saw no context created, so it will report no devices: ask the driver.
            match crate::driver_devices::query() {
                Ok(devs) => devs.iter().for_each(|d| fb.json(tag::DEVICE_INFO, d)),
                Err(e) => fb.frame(tag::NOTE, format!("no device facts: {e}").as_bytes()),
            }
        }
        self.write(&fb.bytes);
        if self.flush_ms > 0 {
            let period = Duration::from_millis(self.flush_ms);
            let _ = std::thread::Builder::new()
                .name("gapscope-flush".into())
                .spawn(move || {
                    loop {
                        std::thread::sleep(period);
                        if let Some(inj) = INJECTOR.get() {
                            // SAFETY: plain call; 0 = deliver buffers with completed records.
                            unsafe { (inj.cupti.flush_all)(0) };
                        }
                    }
                });
        }
        Ok(())
    }

    pub(crate) fn write(&self, bytes: &[u8]) {
        if let Ok(mut f) = self.file.lock() {
            let _ = f.write_all(bytes);
        }
    }

    fn intern(&self, names: &mut Names, fb: &mut FrameBuf, s: &[u8]) -> u64 {
        if let Some(&id) = names.ids.get(s) {
            return id;
        }
        let id = names.ids.len() as u64 + 1;
        names.ids.insert(s.to_vec(), id);
        fb.string(id, s);
        id
    }

    fn drain(&self, ctx: *mut c_void, stream: u32, buffer: *mut u8, valid: usize) {
        if std::process::id() != self.pid {
            return; // a forked child; it has a spool of its own once it initialises CUDA
        }
        let mut fb = FrameBuf::default();
        let (mut n, mut skipped) = (0u32, 0u32);
        if !buffer.is_null() && valid > 0 {
            let mut names = match self.names.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            let mut rec: *mut u8 = std::ptr::null_mut();
            loop {
                // SAFETY: buffer/valid come from CUPTI; rec is CUPTI's cursor.
                let r = unsafe { (self.cupti.get_next_record)(buffer, valid, &mut rec) };
                if r == CUPTI_ERROR_MAX_LIMIT_REACHED {
                    break;
                }
                if r != 0 || rec.is_null() {
                    fb.frame(
                        tag::NOTE,
                        format!(
                            "cuptiActivityGetNextRecord: {}",
                            self.cupti.result_string(r)
                        )
                        .as_bytes(),
                    );
                    break;
                }
                // SAFETY: every record starts with its u32 kind.
                let k = unsafe { (rec as *const u32).read_unaligned() };
                let Some(sz) = layout::record_size(k) else {
                    skipped += 1;
                    continue;
                };
                // SAFETY: CUPTI wrote a whole record of this kind at rec.
                let mut copy = unsafe { std::slice::from_raw_parts(rec, sz) }.to_vec();
                for &off in layout::string_fields(k) {
                    let p = u64::from_le_bytes(copy[off..off + 8].try_into().unwrap_or([0; 8]))
                        as *const c_char;
                    let id = if p.is_null() {
                        0
                    } else {
                        // SAFETY: CUPTI's string fields point at NUL-terminated strings that
                        // live as long as the process.
                        let s = unsafe { CStr::from_ptr(p) }.to_bytes();
                        self.intern(&mut names, &mut fb, s)
                    };
                    copy[off..off + 8].copy_from_slice(&id.to_le_bytes());
                }
                for &off in layout::opaque_pointer_fields(k) {
                    copy[off..off + 8].fill(0);
                }
                if k == kind::RUNTIME || k == kind::DRIVER {
                    let cbid = u32::from_le_bytes(
                        copy[layout::api::CBID..layout::api::CBID + 4]
                            .try_into()
                            .unwrap_or([0; 4]),
                    );
                    let domain = layout::api_domain(k == kind::RUNTIME);
                    if names.api.insert((domain, cbid)) {
                        let name = self
                            .cupti
                            .callback_name(domain, cbid)
                            .unwrap_or_else(|| format!("cbid_{cbid}").into_bytes());
                        let mut payload = Vec::with_capacity(8 + name.len());
                        payload.extend_from_slice(&domain.to_le_bytes());
                        payload.extend_from_slice(&cbid.to_le_bytes());
                        payload.extend_from_slice(&name);
                        fb.frame(tag::API_NAME, &payload);
                    }
                }
                fb.frame(tag::RECORD, &copy);
                n += 1;
            }
        }
        let mut dropped = 0usize;
        // SAFETY: ctx and stream come from CUPTI's completion callback.
        if unsafe { (self.cupti.get_num_dropped)(ctx, stream, &mut dropped) } == 0 && dropped > 0 {
            fb.dropped(ctx as usize as u32, stream, dropped as u64);
        }
        fb.buffer_end(valid as u64, n, skipped);
        self.buffers.fetch_add(1, Ordering::Relaxed);
        self.records.fetch_add(n as u64, Ordering::Relaxed);
        self.skipped.fetch_add(skipped as u64, Ordering::Relaxed);
        self.write(&fb.bytes);
    }
}

/// A whole number from the environment, `None` when unset or not one.
fn whole(v: Option<String>) -> Option<u32> {
    v?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_through_the_environment() {
        let s = InjectSettings {
            spool_dir: "/tmp/x.spool".into(),
            cupti_lib: "/usr/local/cuda/lib/libcupti.so.13".into(),
            memops: false,
            buffer_bytes: 1 << 20,
            flush_ms: 50,
            runtime_api: true,
            driver_api: false,
            collect: Collect::Range,
            rank: None,
            local_rank: None,
            world_size: None,
        };
        let mut env: HashMap<_, _> = s.to_env().into_iter().collect();
        let back = InjectSettings::from_env(&|k| env.get(k).cloned()).unwrap();
        assert_eq!(back, s);
        // The recorder never sets a rank: each process reads the one its launcher set.
        assert!(!env.contains_key("RANK"));
        for (k, v) in [("RANK", "3"), ("LOCAL_RANK", " 1"), ("WORLD_SIZE", "eight")] {
            env.insert(k, v.to_owned());
        }
        let ranked = InjectSettings::from_env(&|k| env.get(k).cloned()).unwrap();
        assert_eq!(
            (ranked.rank, ranked.local_rank, ranked.world_size),
            (Some(3), Some(1), None)
        );
        assert!(!back.kinds().contains(&kind::MEMCPY));
        assert!(back.kinds().contains(&kind::RUNTIME) && !back.kinds().contains(&kind::DRIVER));
        assert_eq!(back.kinds_at_init(), vec![kind::DEVICE]);
        assert!(back.kinds_in_range().contains(&kind::CONCURRENT_KERNEL));
        assert!(!back.kinds_in_range().contains(&kind::DEVICE));
        let whole = InjectSettings {
            collect: Collect::Init,
            ..back.clone()
        };
        assert_eq!(whole.kinds_at_init(), whole.kinds());
        assert!(whole.kinds_in_range().is_empty());
        let late = InjectSettings {
            collect: Collect::Late,
            ..back.clone()
        };
        assert!(late.kinds_at_init().is_empty());
        assert_eq!(late.kinds_in_range(), late.kinds());
        let env: HashMap<_, _> = late.to_env().into_iter().collect();
        assert_eq!(
            InjectSettings::from_env(&|k| env.get(k).cloned()).unwrap(),
            late
        );
        let odd = |k: &str| match k {
            InjectSettings::SPOOL_DIR | InjectSettings::CUPTI_LIB => Some("x".to_owned()),
            InjectSettings::COLLECT => Some("later".to_owned()),
            _ => None,
        };
        assert!(
            InjectSettings::from_env(&odd)
                .unwrap_err()
                .contains("GAPSCOPE_COLLECT")
        );
        let e = InjectSettings::from_env(&|_| None).unwrap_err();
        assert!(e.contains("GAPSCOPE_SPOOL_DIR"), "{e}");
        let bad = |k: &str| match k {
            InjectSettings::SPOOL_DIR | InjectSettings::CUPTI_LIB => Some("x".to_owned()),
            InjectSettings::FLUSH_MS => Some("soon".to_owned()),
            _ => None,
        };
        assert!(
            InjectSettings::from_env(&bad)
                .unwrap_err()
                .contains("GAPSCOPE_FLUSH_MS")
        );
    }
}
