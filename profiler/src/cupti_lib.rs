//! Loading libcupti by path. The recorder loads the exact file the user chose (or the one
//! the search found) rather than whatever the dynamic loader would pick, and checks its
//! version before a child is started, so a wrong CUPTI is one clear message.

use std::ffi::{CStr, c_char, c_int};
use std::path::{Path, PathBuf};

use crate::error::{RecordError, Result};
use crate::layout::{SUPPORTED_CUPTI_API_VERSIONS, cuda_release_of};

pub type CuptiResult = c_int;
pub type BufferRequested = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
pub type BufferCompleted = unsafe extern "C" fn(*mut std::ffi::c_void, u32, *mut u8, usize, usize);
/// `CUpti_CallbackFunc`: (userdata, domain, cbid, callback data).
pub type CallbackFunc =
    unsafe extern "C" fn(*mut std::ffi::c_void, u32, u32, *const std::ffi::c_void);

/// The CUPTI entry points the recorder calls.
pub struct CuptiLib {
    pub path: PathBuf,
    _lib: libloading::Library,
    pub get_version: unsafe extern "C" fn(*mut u32) -> CuptiResult,
    pub get_result_string: unsafe extern "C" fn(CuptiResult, *mut *const c_char) -> CuptiResult,
    pub get_timestamp: unsafe extern "C" fn(*mut u64) -> CuptiResult,
    pub register_callbacks: unsafe extern "C" fn(BufferRequested, BufferCompleted) -> CuptiResult,
    pub enable: unsafe extern "C" fn(u32) -> CuptiResult,
    pub flush_all: unsafe extern "C" fn(u32) -> CuptiResult,
    pub get_next_record: unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> CuptiResult,
    pub get_num_dropped:
        unsafe extern "C" fn(*mut std::ffi::c_void, u32, *mut usize) -> CuptiResult,
    pub get_callback_name: unsafe extern "C" fn(u32, u32, *mut *const c_char) -> CuptiResult,
    pub disable: unsafe extern "C" fn(u32) -> CuptiResult,
    /// `cuptiSubscribe(&handle, callback, userdata)`; the handle is an opaque pointer.
    pub subscribe: unsafe extern "C" fn(
        *mut *mut std::ffi::c_void,
        CallbackFunc,
        *mut std::ffi::c_void,
    ) -> CuptiResult,
    /// `cuptiUnsubscribe(handle)`.
    pub unsubscribe: unsafe extern "C" fn(*mut std::ffi::c_void) -> CuptiResult,
    /// `cuptiEnableCallback(enable, handle, domain, cbid)`.
    pub enable_callback: unsafe extern "C" fn(u32, *mut std::ffi::c_void, u32, u32) -> CuptiResult,
}

/// `CUPTI_ERROR_MAX_LIMIT_REACHED`: no more records in a buffer.
pub const CUPTI_ERROR_MAX_LIMIT_REACHED: CuptiResult = 12;

impl CuptiLib {
    /// Loads `path` and resolves the entry points. Safety of the calls made later rests on
    /// the signatures above matching CUPTI's C API, which they do for 12.x and 13.x.
    pub fn load(path: &Path) -> Result<Self> {
        let err = |msg: String| RecordError::Cupti {
            path: path.to_owned(),
            msg,
        };
        if !path.exists() {
            return Err(err("no such file".into()));
        }
        // SAFETY: loading a shared library runs its initialisers; libcupti's are benign.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| err(format!("cannot load: {e}")))?;
        macro_rules! sym {
            ($name:literal) => {{
                // SAFETY: the symbol's type is the documented CUPTI signature.
                let s = unsafe { lib.get::<_>(concat!($name, "\0").as_bytes()) }
                    .map_err(|e| err(format!("missing symbol {}: {e}", $name)))?;
                *s
            }};
        }
        Ok(Self {
            get_version: sym!("cuptiGetVersion"),
            get_result_string: sym!("cuptiGetResultString"),
            get_timestamp: sym!("cuptiGetTimestamp"),
            register_callbacks: sym!("cuptiActivityRegisterCallbacks"),
            enable: sym!("cuptiActivityEnable"),
            flush_all: sym!("cuptiActivityFlushAll"),
            get_next_record: sym!("cuptiActivityGetNextRecord"),
            get_num_dropped: sym!("cuptiActivityGetNumDroppedRecords"),
            get_callback_name: sym!("cuptiGetCallbackName"),
            disable: sym!("cuptiActivityDisable"),
            subscribe: sym!("cuptiSubscribe"),
            unsubscribe: sym!("cuptiUnsubscribe"),
            enable_callback: sym!("cuptiEnableCallback"),
            path: path.to_owned(),
            _lib: lib,
        })
    }

    /// `cuptiGetVersion`, needing no GPU.
    pub fn version(&self) -> Result<u32> {
        let mut v = 0u32;
        // SAFETY: valid out-pointer.
        let r = unsafe { (self.get_version)(&mut v) };
        if r != 0 {
            return Err(RecordError::Cupti {
                path: self.path.clone(),
                msg: format!("cuptiGetVersion failed: {}", self.result_string(r)),
            });
        }
        Ok(v)
    }

    /// Refuses CUPTI versions whose record layouts this build does not decode.
    pub fn check_version(&self) -> Result<u32> {
        let v = self.version()?;
        check_version_value(&self.path, v)?;
        Ok(v)
    }

    pub fn result_string(&self, r: CuptiResult) -> String {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: valid out-pointer; CUPTI returns a static string.
        let ok = unsafe { (self.get_result_string)(r, &mut p) } == 0 && !p.is_null();
        if ok {
            // SAFETY: non-null, NUL-terminated static string from CUPTI.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        } else {
            format!("CUPTI error {r}")
        }
    }

    /// `cuptiGetCallbackName`, or None for a cbid the library does not know.
    pub fn callback_name(&self, domain: u32, cbid: u32) -> Option<Vec<u8>> {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: valid out-pointer; CUPTI returns a static string.
        let ok = unsafe { (self.get_callback_name)(domain, cbid, &mut p) } == 0 && !p.is_null();
        // SAFETY: non-null NUL-terminated static string.
        ok.then(|| unsafe { CStr::from_ptr(p) }.to_bytes().to_vec())
    }

    pub fn timestamp(&self) -> u64 {
        let mut t = 0u64;
        // SAFETY: valid out-pointer.
        unsafe { (self.get_timestamp)(&mut t) };
        t
    }
}

/// The version check, apart from the library so it is testable.
pub fn check_version_value(path: &Path, v: u32) -> Result<()> {
    if SUPPORTED_CUPTI_API_VERSIONS.contains(&v) {
        return Ok(());
    }
    Err(RecordError::Cupti {
        path: path.to_owned(),
        msg: format!(
            "CUPTI API version {v} (CUDA {}) is not supported: this build decodes the CUDA 13.0 activity records (CUpti_ActivityKernel10, CUPTI API {}..={}); later releases changed the record layouts. Use the CUPTI of CUDA 13.0 with --cupti-lib",
            cuda_release_of(v),
            SUPPORTED_CUPTI_API_VERSIONS.start(),
            SUPPORTED_CUPTI_API_VERSIONS.end()
        ),
    })
}

/// Where a CUDA 13 CUPTI usually lives, in search order: `$CUDA_HOME`/`$CUDA_PATH`, the
/// standard toolkit locations, the directories of `LD_LIBRARY_PATH`, the system library
/// directories, then pip's `nvidia-cuda-cupti` wheels in the usual site-packages.
pub fn candidate_dirs(env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(root) = env(var).filter(|s| !s.is_empty()) {
            let root = PathBuf::from(root);
            dirs.push(root.join("targets/x86_64-linux/lib"));
            dirs.push(root.join("extras/CUPTI/lib64"));
            dirs.push(root.join("lib64"));
        }
    }
    for root in [
        "/usr/local/cuda",
        "/usr/local/cuda-13.0",
        "/usr/local/cuda-13",
        "/opt/cuda",
    ] {
        let root = PathBuf::from(root);
        dirs.push(root.join("targets/x86_64-linux/lib"));
        dirs.push(root.join("extras/CUPTI/lib64"));
        dirs.push(root.join("lib64"));
    }
    if let Some(ld) = env("LD_LIBRARY_PATH") {
        dirs.extend(ld.split(':').filter(|s| !s.is_empty()).map(PathBuf::from));
    }
    for d in ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"] {
        dirs.push(PathBuf::from(d));
    }
    let mut site: Vec<PathBuf> = Vec::new();
    if let Some(v) = env("VIRTUAL_ENV") {
        site.push(PathBuf::from(v).join("lib"));
    }
    if let Some(h) = env("HOME") {
        site.push(PathBuf::from(h).join(".local/lib"));
    }
    site.push(PathBuf::from("/usr/local/lib"));
    site.push(PathBuf::from("/usr/lib"));
    for base in site {
        let Ok(rd) = std::fs::read_dir(&base) else {
            continue;
        };
        let mut pys: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("python3"))
            })
            .collect();
        pys.sort();
        for py in pys {
            for pkgs in ["site-packages", "dist-packages"] {
                let nv = py.join(pkgs).join("nvidia");
                dirs.push(nv.join("cu13/lib"));
                dirs.push(nv.join("cuda_cupti/lib"));
            }
        }
    }
    dirs
}

/// File names of a CUDA 13 CUPTI, most specific first.
pub const CUPTI_FILE_NAMES: [&str; 2] = ["libcupti.so.13", "libcupti.so"];

/// Finds the first loadable CUPTI of a supported version. The error lists every place
/// looked at, and the reason a found library was refused.
pub fn find_cupti(env: &dyn Fn(&str) -> Option<String>) -> Result<CuptiLib> {
    let mut searched = Vec::new();
    let mut refused = Vec::new();
    for d in candidate_dirs(env) {
        for name in CUPTI_FILE_NAMES {
            let p = d.join(name);
            if !p.exists() {
                continue;
            }
            match CuptiLib::load(&p).and_then(|l| l.check_version().map(|_| l)) {
                Ok(l) => return Ok(l),
                Err(e) => refused.push(e.to_string()),
            }
        }
        searched.push(d.display().to_string());
    }
    searched.dedup();
    let mut s = searched.join(", ");
    if !refused.is_empty() {
        s.push_str("; found but refused: ");
        s.push_str(&refused.join("; "));
    }
    Err(RecordError::CuptiNotFound { searched: s })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_library_is_one_clear_error() {
        let e = CuptiLib::load(Path::new("/nonexistent/libcupti.so.13"))
            .err()
            .unwrap()
            .to_string();
        assert_eq!(e, "CUPTI library /nonexistent/libcupti.so.13: no such file");
        // A file that exists but is no shared library.
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("libcupti.so.13");
        std::fs::write(&p, b"not an ELF").unwrap();
        let e = CuptiLib::load(&p).err().unwrap().to_string();
        assert!(e.contains("cannot load"), "{e}");
    }

    #[test]
    fn version_policy() {
        assert!(check_version_value(Path::new("x"), 130001).is_ok());
        let e = check_version_value(Path::new("x"), 130101)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("130101") && e.contains("CUDA 13.1") && e.contains("not supported"),
            "{e}"
        );
        assert!(check_version_value(Path::new("x"), 28).is_err());
    }

    #[test]
    fn search_order_and_not_found_message() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().to_string_lossy().into_owned();
        let py = d
            .path()
            .join(".local/lib/python3.12/site-packages/nvidia/cu13/lib");
        std::fs::create_dir_all(&py).unwrap();
        let env = |k: &str| match k {
            "CUDA_HOME" => Some("/opt/mycuda".to_owned()),
            "LD_LIBRARY_PATH" => Some("/a:/b".to_owned()),
            "HOME" => Some(home.clone()),
            _ => None,
        };
        let dirs = candidate_dirs(&env);
        assert_eq!(
            dirs[0],
            PathBuf::from("/opt/mycuda/targets/x86_64-linux/lib")
        );
        let pos = |p: &str| dirs.iter().position(|d| d == Path::new(p)).unwrap();
        assert!(pos("/usr/local/cuda/targets/x86_64-linux/lib") < pos("/a"));
        assert!(pos("/a") < pos("/b"));
        assert!(dirs.contains(&py));
        // A fake "CUPTI" in the pip location is found and refused with its reason.
        std::fs::write(py.join("libcupti.so.13"), b"junk").unwrap();
        let env2 = |k: &str| {
            if k == "HOME" {
                Some(home.clone())
            } else {
                None
            }
        };
        if let Err(e) = find_cupti(&env2) {
            let e = e.to_string();
            assert!(e.starts_with("no CUPTI library found"), "{e}");
            assert!(
                e.contains("found but refused") && e.contains("cu13/lib/libcupti.so.13"),
                "{e}"
            );
        }
    }
}
