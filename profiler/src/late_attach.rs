//! `--collect late`: CUPTI is not touched until the program calls `cudaProfilerStart`, the
//! way torch.profiler (Kineto) attaches at `profile()`, after the program has loaded and run
//! its CUDA modules. With CUPTI attached from initialisation (`init`, and `range`, which only
//! switches the activity kinds) the same short kernels measure about one 32 ns tick longer
//! than under late-attached torch.profiler (docs/decisions/2026-11-22-recorder-collect-late.md).
//!
//! The launcher preloads this library (`LD_PRELOAD`), so the definitions below take the
//! place of libcudart's for every caller that links libcudart dynamically (PyTorch and most
//! Python stacks). Each one switches collection and then calls libcudart's own function.
//! A program with a static libcudart, or one that calls the driver's `cuProfilerStart`, never
//! reaches them and records nothing; `range` covers those.

use std::ffi::{CStr, CString, c_int, c_void};
use std::sync::OnceLock;
use std::sync::atomic::Ordering;

use crate::collect_range::Switch;
use crate::inject::{INJECTOR, RANGE};
use crate::spool::{FrameBuf, tag};

type ProfilerFn = unsafe extern "C" fn() -> c_int;

/// `cudaErrorUnknown`, for a call with no libcudart to forward to.
const CUDA_ERROR_UNKNOWN: c_int = 999;

/// File names of the loaded shared objects, in load order.
fn loaded_objects() -> Vec<CString> {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: `data` is the Vec passed below; `info` is valid for this call.
        unsafe {
            let v = &mut *(data as *mut Vec<CString>);
            let name = (*info).dlpi_name;
            if !name.is_null() && *name != 0 {
                v.push(CStr::from_ptr(name).to_owned());
            }
        }
        0
    }
    let mut all: Vec<CString> = Vec::new();
    // SAFETY: the callback only reads `info` and appends to the Vec it is given.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut all as *mut Vec<CString> as *mut c_void) };
    all
}

/// Whether a loaded object's path names a CUDA runtime library (also a renamed copy such as
/// a wheel's `libcudart-1a2b3c4d.so.13`).
pub fn is_cudart(path: &[u8]) -> bool {
    let file = path.rsplit(|&c| c == b'/').next().unwrap_or(path);
    file.starts_with(b"libcudart") && file.windows(3).any(|w| w == b".so")
}

/// `name` as defined by the loaded object `path`, if it defines it and that is not `own`.
fn defined_in(path: &CStr, name: &CStr, own: usize) -> Option<*mut c_void> {
    // SAFETY: RTLD_NOLOAD only returns a handle to an object already loaded.
    let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
    if h.is_null() {
        return None;
    }
    // SAFETY: valid handle and NUL-terminated name.
    let p = unsafe { libc::dlsym(h, name.as_ptr()) };
    // The object stays loaded (the program holds it); only our extra reference goes.
    // SAFETY: the handle dlopen returned.
    unsafe { libc::dlclose(h) };
    (!p.is_null() && p as usize != own).then_some(p)
}

/// The real `name`: the next definition after this library (`RTLD_NEXT`), else a loaded
/// libcudart's (a Python extension loads it privately, where `RTLD_NEXT` does not look), else
/// any loaded object's. Never `own`, this library's definition.
fn find_real(name: &CStr, own: usize) -> Option<ProfilerFn> {
    // SAFETY: NUL-terminated name.
    let next = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    let p = (!next.is_null() && next as usize != own)
        .then_some(next)
        .or_else(|| {
            let objects = loaded_objects();
            let (cudart, rest): (Vec<_>, Vec<_>) =
                objects.into_iter().partition(|o| is_cudart(o.as_bytes()));
            cudart
                .iter()
                .chain(&rest)
                .find_map(|o| defined_in(o, name, own))
        })?;
    // SAFETY: both functions are `cudaError_t f(void)`.
    Some(unsafe { std::mem::transmute::<*mut c_void, ProfilerFn>(p) })
}

/// Calls the real `name`, found once; a lookup that found nothing is tried again next time
/// (the runtime may load later).
fn forward(cache: &OnceLock<usize>, name: &CStr, own: usize) -> c_int {
    let addr = match cache.get() {
        Some(&a) => Some(a),
        None => find_real(name, own).map(|f| *cache.get_or_init(|| f as usize)),
    };
    match addr {
        // SAFETY: the address came from dlsym for a `cudaError_t f(void)` function.
        Some(a) => unsafe { std::mem::transmute::<usize, ProfilerFn>(a)() },
        None => CUDA_ERROR_UNKNOWN,
    }
}

/// Switches collection when this process records with `--collect late`; nothing otherwise
/// (the other modes never preload this library, but a global symbol may still bind here).
fn switch(want: Switch) {
    let (Some(inj), Some(rc)) = (INJECTOR.get(), RANGE.get()) else {
        return;
    };
    if !inj.late || inj.pid != std::process::id() {
        return;
    }
    rc.switch_with(want, |sw| {
        if sw == Switch::On
            && let Err(e) = inj.attach()
        {
            let mut fb = FrameBuf::default();
            fb.frame(tag::NOTE, format!("--collect late: {e}").as_bytes());
            inj.write(&fb.bytes);
            return false;
        }
        let fb = rc.apply(&inj.cupti, sw);
        inj.write(&fb.bytes);
        if sw == Switch::Off && inj.attached.load(Ordering::Acquire) {
            // SAFETY: plain call; 0 = deliver buffers with completed records.
            unsafe { (inj.cupti.flush_all)(0) };
        }
        true
    });
}

static REAL_START: OnceLock<usize> = OnceLock::new();
static REAL_STOP: OnceLock<usize> = OnceLock::new();

/// Interposes libcudart's `cudaProfilerStart`: starts the runtime's own range (which also
/// initialises CUDA, and with it the injection library, when it is the program's first CUDA
/// call), then attaches CUPTI and switches collection on.
#[unsafe(no_mangle)]
pub extern "C" fn cudaProfilerStart() -> c_int {
    let r = forward(
        &REAL_START,
        c"cudaProfilerStart",
        cudaProfilerStart as *const () as usize,
    );
    let _ = std::panic::catch_unwind(|| switch(Switch::On));
    r
}

/// Interposes libcudart's `cudaProfilerStop`: switches collection off, then stops the
/// runtime's own range.
#[unsafe(no_mangle)]
pub extern "C" fn cudaProfilerStop() -> c_int {
    let _ = std::panic::catch_unwind(|| switch(Switch::Off));
    forward(
        &REAL_STOP,
        c"cudaProfilerStop",
        cudaProfilerStop as *const () as usize,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cudart_is_recognised_by_file_name() {
        assert!(is_cudart(
            b"/usr/lib/python3/site-packages/nvidia/cu13/lib/libcudart.so.13"
        ));
        assert!(is_cudart(b"libcudart.so"));
        assert!(is_cudart(b"/x/torch.libs/libcudart-1a2b3c4d.so.13"));
        assert!(!is_cudart(b"/opt/libcudart_static.a"));
        assert!(!is_cudart(b"/usr/lib/libcudart.so.13/../libcuda.so.1"));
        assert!(!is_cudart(b"/usr/lib/libcuda.so.1"));
    }

    #[test]
    fn loaded_objects_include_the_c_library() {
        assert!(
            loaded_objects()
                .iter()
                .any(|o| o.to_string_lossy().contains("libc.so")),
            "{:?}",
            loaded_objects()
        );
    }

    #[test]
    fn with_no_cudart_loaded_the_interposers_report_an_error_and_record_nothing() {
        // The test binary has no libcudart and no injector: nothing to forward to.
        assert_eq!(cudaProfilerStart(), CUDA_ERROR_UNKNOWN);
        assert_eq!(cudaProfilerStop(), CUDA_ERROR_UNKNOWN);
    }
}
