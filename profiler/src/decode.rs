//! Raw CUPTI 13.0 activity records (as spooled) to typed activities. Pure byte decoding,
//! so CI tests it on recorded fixtures without a GPU.

use crate::layout::{self, api, device, kernel, kind, marker, memcpy, memset, overhead};
use crate::spool::{rd_i32, rd_u8, rd_u16, rd_u32, rd_u64};

/// One decoded activity. Times are CUPTI timestamps in ns; string fields are spool string
/// ids (0 = none).
#[derive(Debug, Clone, PartialEq)]
pub enum Activity {
    Kernel(Kernel),
    Memcpy(Memop),
    Memset(Memop),
    Api(Api),
    Marker(Marker),
    Overhead {
        overhead_kind: u32,
        start: u64,
        end: u64,
    },
    Device(Device),
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Kernel {
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub correlation: u32,
    pub name: u64,
    pub start: u64,
    pub end: u64,
    pub grid: [i32; 3],
    pub block: [i32; 3],
    pub registers: u16,
    pub static_smem: i32,
    pub dynamic_smem: i32,
    pub graph_id: u32,
    pub graph_node_id: u64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Memop {
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub correlation: u32,
    /// `CUpti_ActivityMemcpyKind` for copies, 0 for sets.
    pub copy_kind: u8,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub graph_id: u32,
    pub graph_node_id: u64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Api {
    /// True for runtime API records, false for driver API ones.
    pub runtime: bool,
    pub cbid: u32,
    pub start: u64,
    pub end: u64,
    pub pid: u32,
    pub tid: u32,
    pub correlation: u32,
    pub return_value: u32,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Marker {
    pub flags: u32,
    pub timestamp: u64,
    pub id: u32,
    /// `CUpti_ActivityObjectKind`: 1 process, 2 thread, ...
    pub object_kind: u32,
    /// For thread markers: the process id then the thread id.
    pub pid: u32,
    pub tid: u32,
    pub name: u64,
    pub domain: u64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Device {
    pub id: u32,
    pub name: u64,
    pub sm_count: u32,
    pub memory_bytes: u64,
    pub memory_bandwidth_kbps: u64,
    pub l2_bytes: u32,
    pub core_clock_khz: u32,
    pub cc: (u32, u32),
    pub uuid: [u8; 16],
}

/// Why a record could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeSkip {
    /// A kind this build does not decode.
    UnknownKind(u32),
    /// The record is shorter than its kind's layout.
    Short { kind: u32, len: usize },
}

/// Decodes one spooled record.
pub fn decode(rec: &[u8]) -> Result<Activity, DecodeSkip> {
    let k = rd_u32(rec, 0);
    let Some(size) = layout::record_size(k) else {
        return Err(DecodeSkip::UnknownKind(k));
    };
    if rec.len() < size {
        return Err(DecodeSkip::Short {
            kind: k,
            len: rec.len(),
        });
    }
    Ok(match k {
        kind::CONCURRENT_KERNEL => Activity::Kernel(Kernel {
            device: rd_u32(rec, kernel::DEVICE),
            context: rd_u32(rec, kernel::CONTEXT),
            stream: rd_u32(rec, kernel::STREAM),
            correlation: rd_u32(rec, kernel::CORRELATION),
            name: rd_u64(rec, kernel::NAME),
            start: rd_u64(rec, kernel::START),
            end: rd_u64(rec, kernel::END),
            grid: [
                rd_i32(rec, kernel::GRID_X),
                rd_i32(rec, kernel::GRID_Y),
                rd_i32(rec, kernel::GRID_Z),
            ],
            block: [
                rd_i32(rec, kernel::BLOCK_X),
                rd_i32(rec, kernel::BLOCK_Y),
                rd_i32(rec, kernel::BLOCK_Z),
            ],
            registers: rd_u16(rec, kernel::REGISTERS),
            static_smem: rd_i32(rec, kernel::STATIC_SMEM),
            dynamic_smem: rd_i32(rec, kernel::DYNAMIC_SMEM),
            graph_id: rd_u32(rec, kernel::GRAPH),
            graph_node_id: rd_u64(rec, kernel::GRAPH_NODE),
        }),
        kind::MEMCPY => Activity::Memcpy(Memop {
            device: rd_u32(rec, memcpy::DEVICE),
            context: rd_u32(rec, memcpy::CONTEXT),
            stream: rd_u32(rec, memcpy::STREAM),
            correlation: rd_u32(rec, memcpy::CORRELATION),
            copy_kind: rd_u8(rec, memcpy::COPY_KIND),
            bytes: rd_u64(rec, memcpy::BYTES),
            start: rd_u64(rec, memcpy::START),
            end: rd_u64(rec, memcpy::END),
            graph_id: rd_u32(rec, memcpy::GRAPH),
            graph_node_id: rd_u64(rec, memcpy::GRAPH_NODE),
        }),
        kind::MEMSET => Activity::Memset(Memop {
            device: rd_u32(rec, memset::DEVICE),
            context: rd_u32(rec, memset::CONTEXT),
            stream: rd_u32(rec, memset::STREAM),
            correlation: rd_u32(rec, memset::CORRELATION),
            copy_kind: 0,
            bytes: rd_u64(rec, memset::BYTES),
            start: rd_u64(rec, memset::START),
            end: rd_u64(rec, memset::END),
            graph_id: rd_u32(rec, memset::GRAPH),
            graph_node_id: rd_u64(rec, memset::GRAPH_NODE),
        }),
        kind::RUNTIME | kind::DRIVER => Activity::Api(Api {
            runtime: k == kind::RUNTIME,
            cbid: rd_u32(rec, api::CBID),
            start: rd_u64(rec, api::START),
            end: rd_u64(rec, api::END),
            pid: rd_u32(rec, api::PROCESS),
            tid: rd_u32(rec, api::THREAD),
            correlation: rd_u32(rec, api::CORRELATION),
            return_value: rd_u32(rec, api::RETURN),
        }),
        kind::MARKER => Activity::Marker(Marker {
            flags: rd_u32(rec, marker::FLAGS),
            timestamp: rd_u64(rec, marker::TIMESTAMP),
            id: rd_u32(rec, marker::ID),
            object_kind: rd_u32(rec, marker::OBJECT_KIND),
            pid: rd_u32(rec, marker::OBJECT_ID),
            tid: rd_u32(rec, marker::OBJECT_ID + 4),
            name: rd_u64(rec, marker::NAME),
            domain: rd_u64(rec, marker::DOMAIN),
        }),
        kind::OVERHEAD => Activity::Overhead {
            overhead_kind: rd_u32(rec, overhead::OVERHEAD_KIND),
            start: rd_u64(rec, overhead::START),
            end: rd_u64(rec, overhead::END),
        },
        kind::DEVICE => {
            let mut uuid = [0u8; 16];
            if let Some(s) = rec.get(device::UUID..device::UUID + 16) {
                uuid.copy_from_slice(s);
            }
            Activity::Device(Device {
                id: rd_u32(rec, device::ID),
                name: rd_u64(rec, device::NAME),
                sm_count: rd_u32(rec, device::SM_COUNT),
                memory_bytes: rd_u64(rec, device::MEMORY_BYTES),
                memory_bandwidth_kbps: rd_u64(rec, device::MEMORY_BANDWIDTH_KBPS),
                l2_bytes: rd_u32(rec, device::L2_BYTES),
                core_clock_khz: rd_u32(rec, device::CORE_CLOCK_KHZ),
                cc: (rd_u32(rec, device::CC_MAJOR), rd_u32(rec, device::CC_MINOR)),
                uuid,
            })
        }
        other => return Err(DecodeSkip::UnknownKind(other)),
    })
}

/// NVML-style `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` spelling of a CUDA device UUID, so
/// telemetry can be matched to the device CUPTI reports.
pub fn uuid_string(u: &[u8; 16]) -> String {
    let h: Vec<String> = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..16].concat()
    )
}

/// Test and fixture helper: a zeroed record of `kind` with fields set by offset.
pub fn blank_record(k: u32) -> Vec<u8> {
    let mut v = vec![0u8; layout::record_size(k).unwrap_or(8)];
    v[0..4].copy_from_slice(&k.to_le_bytes());
    v
}

/// Test and fixture helper: writes a little-endian integer of `N` bytes at `off`.
pub fn put<const N: usize>(rec: &mut [u8], off: usize, bytes: [u8; N]) {
    rec[off..off + N].copy_from_slice(&bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_fields_round_trip() {
        let mut r = blank_record(kind::CONCURRENT_KERNEL);
        put(&mut r, kernel::START, 1_000u64.to_le_bytes());
        put(&mut r, kernel::END, 1_500u64.to_le_bytes());
        put(&mut r, kernel::DEVICE, 1u32.to_le_bytes());
        put(&mut r, kernel::STREAM, 7u32.to_le_bytes());
        put(&mut r, kernel::CORRELATION, 42u32.to_le_bytes());
        put(&mut r, kernel::NAME, 3u64.to_le_bytes());
        put(&mut r, kernel::GRID_X, 128i32.to_le_bytes());
        put(&mut r, kernel::BLOCK_X, 256i32.to_le_bytes());
        put(&mut r, kernel::REGISTERS, 40u16.to_le_bytes());
        put(&mut r, kernel::GRAPH, 9u32.to_le_bytes());
        put(&mut r, kernel::GRAPH_NODE, 77u64.to_le_bytes());
        let Ok(Activity::Kernel(k)) = decode(&r) else {
            panic!("not a kernel")
        };
        assert_eq!(
            (k.start, k.end, k.device, k.stream, k.correlation, k.name),
            (1000, 1500, 1, 7, 42, 3)
        );
        assert_eq!(
            (
                k.grid[0],
                k.block[0],
                k.registers,
                k.graph_id,
                k.graph_node_id
            ),
            (128, 256, 40, 9, 77)
        );
    }

    #[test]
    fn memcpy_memset_api_marker() {
        let mut r = blank_record(kind::MEMCPY);
        put(&mut r, memcpy::COPY_KIND, [8u8]);
        put(&mut r, memcpy::BYTES, 4096u64.to_le_bytes());
        let Ok(Activity::Memcpy(m)) = decode(&r) else {
            panic!()
        };
        assert_eq!((m.copy_kind, m.bytes), (8, 4096));
        let mut r = blank_record(kind::MEMSET);
        put(&mut r, memset::BYTES, 64u64.to_le_bytes());
        assert!(matches!(
            decode(&r),
            Ok(Activity::Memset(Memop { bytes: 64, .. }))
        ));
        let mut r = blank_record(kind::DRIVER);
        put(&mut r, api::CORRELATION, 5u32.to_le_bytes());
        assert!(matches!(
            decode(&r),
            Ok(Activity::Api(Api {
                runtime: false,
                correlation: 5,
                ..
            }))
        ));
        let mut r = blank_record(kind::MARKER);
        put(
            &mut r,
            marker::FLAGS,
            layout::marker_flag::START.to_le_bytes(),
        );
        put(&mut r, marker::OBJECT_ID + 4, 99u32.to_le_bytes());
        assert!(matches!(
            decode(&r),
            Ok(Activity::Marker(Marker {
                flags: 2,
                tid: 99,
                ..
            }))
        ));
    }

    #[test]
    fn unknown_and_short_records_are_skipped_not_misread() {
        assert_eq!(
            decode(&[42, 0, 0, 0, 0, 0, 0, 0]),
            Err(DecodeSkip::UnknownKind(42))
        );
        let r = blank_record(kind::CONCURRENT_KERNEL);
        assert!(matches!(decode(&r[..100]), Err(DecodeSkip::Short { .. })));
        assert!(matches!(decode(&[]), Err(DecodeSkip::UnknownKind(0))));
    }

    #[test]
    fn uuid_spelling_matches_nvml() {
        let u = [
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0, 1, 2, 3, 4, 5, 6, 7,
        ];
        assert_eq!(uuid_string(&u), "GPU-12345678-9abc-def0-0001-020304050607");
    }
}
