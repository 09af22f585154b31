//! Where the fields of the CUPTI 13.0 activity records sit. The offsets come from cudarc's
//! bindings of the 13.0 headers (`offset_of!`), so the decoder and the injection library
//! agree with the library they load, and a CUPTI whose records differ is refused by
//! version rather than misread.

use std::mem::{offset_of, size_of};

use cudarc::cupti::sys as cu;

/// `cuptiGetVersion` values whose record layouts this build decodes (CUDA 13.0.x). 13.1
/// changed the kernel record (Kernel11), so later versions are refused by name.
pub const SUPPORTED_CUPTI_API_VERSIONS: std::ops::RangeInclusive<u32> = 130000..=130099;

/// The CUDA release a CUPTI API version belongs to, for messages ("13.0").
pub fn cuda_release_of(api_version: u32) -> String {
    if api_version >= 100_000 {
        format!("{}.{}", api_version / 10_000, (api_version / 100) % 100)
    } else {
        format!("CUPTI API {api_version} (CUDA 12.x or older)")
    }
}

/// `CUpti_ActivityKind` codes the recorder enables and decodes.
pub mod kind {
    pub const MEMCPY: u32 = 1;
    pub const MEMSET: u32 = 2;
    pub const DRIVER: u32 = 4;
    pub const RUNTIME: u32 = 5;
    pub const DEVICE: u32 = 8;
    pub const CONCURRENT_KERNEL: u32 = 10;
    pub const MARKER: u32 = 12;
    pub const OVERHEAD: u32 = 17;
}

/// The CUPTI callback domain of an API record (`CUPTI_CB_DOMAIN_DRIVER_API` = 1,
/// `CUPTI_CB_DOMAIN_RUNTIME_API` = 2): how the injection library asks for an API's name and
/// how the launcher looks it up again in the spool's API-name frames.
pub fn api_domain(runtime: bool) -> u32 {
    if runtime { 2 } else { 1 }
}

/// Size in bytes of one record of `kind` as CUPTI 13.0 writes it; `None` for kinds the
/// recorder does not decode (they are counted and skipped).
pub fn record_size(kind: u32) -> Option<usize> {
    Some(match kind {
        kind::MEMCPY => size_of::<cu::CUpti_ActivityMemcpy6>(),
        kind::MEMSET => size_of::<cu::CUpti_ActivityMemset4>(),
        kind::DRIVER | kind::RUNTIME => size_of::<cu::CUpti_ActivityAPI>(),
        kind::DEVICE => size_of::<cu::CUpti_ActivityDevice5>(),
        kind::CONCURRENT_KERNEL => size_of::<cu::CUpti_ActivityKernel10>(),
        kind::MARKER => size_of::<cu::CUpti_ActivityMarker2>(),
        kind::OVERHEAD => size_of::<cu::CUpti_ActivityOverhead3>(),
        _ => return None,
    })
}

/// Offsets of the pointer fields that point at strings inside the recorded process. The
/// injection library replaces each with the id of a string frame before spooling.
pub fn string_fields(kind: u32) -> &'static [usize] {
    match kind {
        kind::CONCURRENT_KERNEL => &[kernel::NAME],
        kind::MARKER => &[marker::NAME, marker::DOMAIN],
        kind::DEVICE => &[device::NAME],
        _ => &[],
    }
}

/// Pointer fields that are neither strings nor meaningful outside the process; zeroed.
pub fn opaque_pointer_fields(kind: u32) -> &'static [usize] {
    match kind {
        kind::CONCURRENT_KERNEL => &[kernel::RESERVED0, kernel::ACCESS_POLICY_WINDOW],
        kind::MEMCPY => &[memcpy::RESERVED0],
        kind::MEMSET => &[memset::RESERVED0],
        kind::OVERHEAD => &[overhead::DATA],
        _ => &[],
    }
}

macro_rules! offsets {
    ($m:ident, $t:ident { $($name:ident = $field:ident),* $(,)? }) => {
        #[allow(missing_docs)]
        pub mod $m {
            use super::*;
            $(pub const $name: usize = offset_of!(cu::$t, $field);)*
            /// The C struct these offsets belong to.
            pub const STRUCT: &str = stringify!($t);
            pub const SIZE: usize = size_of::<cu::$t>();
            /// Every field the decoder reads, by its C name, for the header check.
            pub const FIELDS: &[(&str, usize)] = &[$((stringify!($field), $name)),*];
        }
    };
}

offsets!(kernel, CUpti_ActivityKernel10 {
    REGISTERS = registersPerThread,
    START = start,
    END = end,
    DEVICE = deviceId,
    CONTEXT = contextId,
    STREAM = streamId,
    GRID_X = gridX,
    GRID_Y = gridY,
    GRID_Z = gridZ,
    BLOCK_X = blockX,
    BLOCK_Y = blockY,
    BLOCK_Z = blockZ,
    STATIC_SMEM = staticSharedMemory,
    DYNAMIC_SMEM = dynamicSharedMemory,
    CORRELATION = correlationId,
    NAME = name,
    RESERVED0 = reserved0,
    GRAPH_NODE = graphNodeId,
    GRAPH = graphId,
    ACCESS_POLICY_WINDOW = pAccessPolicyWindow,
});

offsets!(memcpy, CUpti_ActivityMemcpy6 {
    COPY_KIND = copyKind,
    BYTES = bytes,
    START = start,
    END = end,
    DEVICE = deviceId,
    CONTEXT = contextId,
    STREAM = streamId,
    CORRELATION = correlationId,
    RESERVED0 = reserved0,
    GRAPH_NODE = graphNodeId,
    GRAPH = graphId,
});

offsets!(memset, CUpti_ActivityMemset4 {
    BYTES = bytes,
    START = start,
    END = end,
    DEVICE = deviceId,
    CONTEXT = contextId,
    STREAM = streamId,
    CORRELATION = correlationId,
    RESERVED0 = reserved0,
    GRAPH_NODE = graphNodeId,
    GRAPH = graphId,
});

offsets!(api, CUpti_ActivityAPI {
    CBID = cbid,
    START = start,
    END = end,
    PROCESS = processId,
    THREAD = threadId,
    CORRELATION = correlationId,
    RETURN = returnValue,
});

offsets!(marker, CUpti_ActivityMarker2 {
    FLAGS = flags,
    TIMESTAMP = timestamp,
    ID = id,
    OBJECT_KIND = objectKind,
    OBJECT_ID = objectId,
    NAME = name,
    DOMAIN = domain,
});

offsets!(overhead, CUpti_ActivityOverhead3 {
    OVERHEAD_KIND = overheadKind,
    START = start,
    END = end,
    DATA = overheadData,
});

offsets!(device, CUpti_ActivityDevice5 {
    MEMORY_BANDWIDTH_KBPS = globalMemoryBandwidth,
    MEMORY_BYTES = globalMemorySize,
    L2_BYTES = l2CacheSize,
    CORE_CLOCK_KHZ = coreClockRate,
    SM_COUNT = numMultiprocessors,
    CC_MAJOR = computeCapabilityMajor,
    CC_MINOR = computeCapabilityMinor,
    ID = id,
    UUID = uuid,
    NAME = name,
});

/// `CUpti_ActivityFlag` bits of marker records.
pub mod marker_flag {
    pub const INSTANTANEOUS: u32 = 1;
    pub const START: u32 = 2;
    pub const END: u32 = 4;
}

/// One record's C name, size and (field, offset) list.
type RecordTable = (&'static str, usize, &'static [(&'static str, usize)]);

/// The sizes and offsets of every record field the decoder reads, one `Type.field offset`
/// line each, in the format of `scripts/record/layout_check.c`, which prints the same lines
/// from the toolkit's own header on the GPU machine; the two are diffed there.
pub fn layout_lines() -> Vec<String> {
    let tables: [RecordTable; 7] = [
        (kernel::STRUCT, kernel::SIZE, kernel::FIELDS),
        (memcpy::STRUCT, memcpy::SIZE, memcpy::FIELDS),
        (memset::STRUCT, memset::SIZE, memset::FIELDS),
        (api::STRUCT, api::SIZE, api::FIELDS),
        (marker::STRUCT, marker::SIZE, marker::FIELDS),
        (overhead::STRUCT, overhead::SIZE, overhead::FIELDS),
        (device::STRUCT, device::SIZE, device::FIELDS),
    ];
    let mut v = Vec::new();
    for (name, size, fields) in tables {
        v.push(format!("{name}.size {size}"));
        v.extend(fields.iter().map(|(f, off)| format!("{name}.{f} {off}")));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes and offsets the decoder relies on, as CUPTI 13.0 documents them; a cudarc
    /// update that changed them would silently misread recordings.
    #[test]
    fn cupti_13_0_layouts() {
        // Checked against offsetof() on the CUDA 13.0 cupti_activity.h on the GPU machine
        // (evidence/recorder-h200.tar.xz: record/run8-layout.log).
        assert_eq!(record_size(kind::CONCURRENT_KERNEL), Some(216));
        assert_eq!(kernel::START, 16);
        assert_eq!(kernel::END, 24);
        assert_eq!(kernel::DEVICE, 40);
        assert_eq!(kernel::CORRELATION, 92);
        assert_eq!(kernel::NAME, 104);
        assert_eq!(kernel::GRAPH_NODE, 144);
        assert_eq!(kernel::GRAPH, 156);
        assert_eq!(record_size(kind::MEMCPY), Some(96));
        assert_eq!(memcpy::BYTES, 8);
        assert_eq!(record_size(kind::MEMSET), Some(88));
        assert_eq!(record_size(kind::RUNTIME), Some(40));
        assert_eq!(api::CORRELATION, 32);
        assert_eq!(record_size(kind::MARKER), Some(56));
        assert_eq!(record_size(kind::DEVICE), Some(184));
        assert_eq!(record_size(kind::OVERHEAD), Some(56));
        assert_eq!(record_size(42), None);
        for k in [
            kind::CONCURRENT_KERNEL,
            kind::MARKER,
            kind::DEVICE,
            kind::MEMCPY,
            kind::MEMSET,
            kind::OVERHEAD,
        ] {
            let size = record_size(k).unwrap();
            for &off in string_fields(k).iter().chain(opaque_pointer_fields(k)) {
                assert!(off + 8 <= size, "kind {k}: pointer at {off} past {size}");
            }
        }
    }

    #[test]
    fn release_names() {
        assert_eq!(cuda_release_of(130001), "13.0");
        assert_eq!(cuda_release_of(130101), "13.1");
        assert!(SUPPORTED_CUPTI_API_VERSIONS.contains(&130001));
        assert!(!SUPPORTED_CUPTI_API_VERSIONS.contains(&130101));
    }
}
