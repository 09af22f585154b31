//! Device facts from the CUDA driver, for `--collect late`: CUPTI emits its DEVICE records
//! only for contexts it saw created, so a CUPTI attached mid-run reports none (run 18), and
//! the trace would have no GPU name, SM count or UUID to match NVML samples to. The driver is
//! already loaded in the recorded process; this asks it directly.

use std::ffi::{CStr, c_char, c_int, c_void};

/// What the spool's `DEVICE_INFO` frame carries (JSON), one per CUDA device.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct DeviceInfo {
    pub id: u32,
    pub name: String,
    pub sm_count: u32,
    pub memory_bytes: u64,
    pub l2_bytes: u32,
    pub core_clock_khz: u32,
    pub cc: (u32, u32),
    pub uuid: [u8; 16],
}

// CUdevice_attribute codes (stable across CUDA releases).
const ATTR_CLOCK_RATE: c_int = 13;
const ATTR_MULTIPROCESSOR_COUNT: c_int = 16;
const ATTR_L2_CACHE_SIZE: c_int = 38;
const ATTR_CC_MAJOR: c_int = 75;
const ATTR_CC_MINOR: c_int = 76;

type GetCount = unsafe extern "C" fn(*mut c_int) -> c_int;
type Get = unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
type GetName = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;
type TotalMem = unsafe extern "C" fn(*mut usize, c_int) -> c_int;
type GetAttribute = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int;
type GetUuid = unsafe extern "C" fn(*mut [u8; 16], c_int) -> c_int;

fn sym<T>(h: *mut c_void, name: &CStr) -> Option<T> {
    // SAFETY: valid handle and NUL-terminated name.
    let p = unsafe { libc::dlsym(h, name.as_ptr()) };
    // SAFETY: the caller names T as the symbol's documented signature; size of a fn pointer.
    (!p.is_null()).then(|| unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
}

/// Every CUDA device's facts, or why there are none.
pub fn query() -> Result<Vec<DeviceInfo>, String> {
    // SAFETY: RTLD_NOLOAD only returns a handle to a library the process already loaded.
    let h = unsafe {
        libc::dlopen(
            c"libcuda.so.1".as_ptr(),
            libc::RTLD_NOLOAD | libc::RTLD_LAZY,
        )
    };
    if h.is_null() {
        return Err("libcuda.so.1 is not loaded in this process".into());
    }
    let r = query_with(h);
    // The driver stays loaded (the program holds it); only our extra reference goes.
    // SAFETY: the handle dlopen returned; no pointer from it is used after this.
    unsafe { libc::dlclose(h) };
    r
}

fn query_with(h: *mut c_void) -> Result<Vec<DeviceInfo>, String> {
    let missing = |n: &str| format!("libcuda.so.1 has no {n}");
    let count: GetCount = sym(h, c"cuDeviceGetCount").ok_or_else(|| missing("cuDeviceGetCount"))?;
    let get: Get = sym(h, c"cuDeviceGet").ok_or_else(|| missing("cuDeviceGet"))?;
    let name: GetName = sym(h, c"cuDeviceGetName").ok_or_else(|| missing("cuDeviceGetName"))?;
    let mem: TotalMem =
        sym(h, c"cuDeviceTotalMem_v2").ok_or_else(|| missing("cuDeviceTotalMem_v2"))?;
    let attr: GetAttribute =
        sym(h, c"cuDeviceGetAttribute").ok_or_else(|| missing("cuDeviceGetAttribute"))?;
    let uuid: Option<GetUuid> =
        sym(h, c"cuDeviceGetUuid_v2").or_else(|| sym(h, c"cuDeviceGetUuid"));
    let mut n: c_int = 0;
    // SAFETY: valid out-pointer.
    let r = unsafe { count(&mut n) };
    if r != 0 {
        return Err(format!("cuDeviceGetCount failed (CUDA error {r})"));
    }
    let mut out = Vec::new();
    for i in 0..n.max(0) {
        let mut dev: c_int = 0;
        // SAFETY: valid out-pointer, ordinal below the count.
        if unsafe { get(&mut dev, i) } != 0 {
            continue;
        }
        let a = |code: c_int| {
            let mut v: c_int = 0;
            // SAFETY: valid out-pointer and device.
            if unsafe { attr(&mut v, code, dev) } == 0 {
                v.max(0) as u32
            } else {
                0
            }
        };
        let mut buf = [0 as c_char; 256];
        // SAFETY: the buffer's length is passed; the driver NUL-terminates.
        let nm = if unsafe { name(buf.as_mut_ptr(), buf.len() as c_int, dev) } == 0 {
            // SAFETY: NUL-terminated within the buffer.
            unsafe { CStr::from_ptr(buf.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        } else {
            String::new()
        };
        let mut bytes: usize = 0;
        // SAFETY: valid out-pointer and device.
        let _ = unsafe { mem(&mut bytes, dev) };
        let mut id = [0u8; 16];
        if let Some(f) = uuid {
            // SAFETY: CUuuid is 16 bytes.
            let _ = unsafe { f(&mut id, dev) };
        }
        out.push(DeviceInfo {
            id: i as u32,
            name: nm,
            sm_count: a(ATTR_MULTIPROCESSOR_COUNT),
            memory_bytes: bytes as u64,
            l2_bytes: a(ATTR_L2_CACHE_SIZE),
            core_clock_khz: a(ATTR_CLOCK_RATE),
            cc: (a(ATTR_CC_MAJOR), a(ATTR_CC_MINOR)),
            uuid: id,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_driver_loaded_it_says_so() {
        // The test process never loads libcuda.
        let e = query().unwrap_err();
        assert!(e.contains("libcuda.so.1 is not loaded"), "{e}");
    }

    #[test]
    fn device_info_round_trips_through_json() {
        let d = DeviceInfo {
            id: 1,
            name: "NVIDIA H200".into(),
            sm_count: 132,
            memory_bytes: 150 << 30,
            l2_bytes: 60 << 20,
            core_clock_khz: 1_980_000,
            cc: (9, 0),
            uuid: [7; 16],
        };
        let j = serde_json::to_vec(&d).unwrap();
        assert_eq!(serde_json::from_slice::<DeviceInfo>(&j).unwrap(), d);
    }
}
