//! The spool: an append-only file per recorded process, written by the injection library
//! one completed CUPTI buffer at a time and read back by `gapscope-record`. A process that
//! dies mid-run leaves every frame up to its last whole write; the reader stops at a torn
//! tail and says so.
//!
//! Layout: the 8-byte magic, then frames of `tag: u32 LE, len: u32 LE, payload`.

use std::fs::File;
use std::io::{BufReader, ErrorKind, Read};
use std::path::{Path, PathBuf};

use crate::error::{RecordError, Result};

/// First bytes of every spool file; the last byte is the spool format version.
pub const MAGIC: &[u8; 8] = b"GSPOOL\x00\x01";

/// Frames longer than this are corruption, not data (the largest real frame is a kernel
/// name of a few KiB).
pub const MAX_FRAME_BYTES: u32 = 16 << 20;

/// Frame tags.
pub mod tag {
    /// JSON [`super::SpoolHeader`].
    pub const HEADER: u32 = 1;
    /// `id: u64` then UTF-8 bytes: a string a record's pointer field referred to.
    pub const STRING: u32 = 2;
    /// One raw CUPTI activity record, string pointers replaced by string ids.
    pub const RECORD: u32 = 3;
    /// `cupti_ns: u64, realtime_ns: i64, monotonic_ns: i64`, read back to back.
    pub const CALIBRATION: u32 = 4;
    /// `context: u32, stream: u32, dropped: u64` from cuptiActivityGetNumDroppedRecords.
    pub const DROPPED: u32 = 5;
    /// JSON [`super::SpoolEnd`]: the process flushed CUPTI and exited normally.
    pub const END: u32 = 6;
    /// UTF-8 text the injection library wants the user to see.
    pub const NOTE: u32 = 7;
    /// `valid_bytes: u64, records: u32, skipped: u32`: one completed CUPTI buffer ended.
    pub const BUFFER: u32 = 8;
    /// `domain: u32, cbid: u32` then the API function's name (domain 1 driver, 2 runtime).
    pub const API_NAME: u32 = 9;
    /// `on: u32, cupti_ns: u64`: collection switched on or off at the capture range
    /// (`--collect range`).
    pub const COLLECT: u32 = 10;
    /// JSON [`crate::driver_devices::DeviceInfo`]: a device's facts from the CUDA driver,
    /// written when CUPTI attached too late to report its devices (`--collect late`).
    pub const DEVICE_INFO: u32 = 11;
}

/// What the injection library knew when it started in the recorded process.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SpoolHeader {
    pub pid: u32,
    pub ppid: u32,
    pub cupti_api_version: u32,
    pub cupti_path: String,
    pub exe: String,
    pub command_line: String,
    /// Activity kinds enabled, by CUPTI code.
    pub kinds: Vec<u32>,
    /// When collection started: init, range or late (`--collect`); empty in older spools.
    pub collect: String,
    /// The process's place in a distributed run, from the `RANK`, `LOCAL_RANK` and
    /// `WORLD_SIZE` its launcher (torchrun, vLLM, SGLang) set; `None` where unset.
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
}

/// Written at a normal exit, after the final flush.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SpoolEnd {
    pub buffers: u64,
    pub records: u64,
    /// Records of kinds this build does not decode.
    pub skipped: u64,
}

/// Serialises frames into a byte buffer; the injection library writes one such buffer per
/// completed CUPTI buffer with a single `write`.
#[derive(Debug, Default)]
pub struct FrameBuf {
    pub bytes: Vec<u8>,
}

impl FrameBuf {
    /// A buffer that starts a spool file: the magic, then whatever frames are added.
    pub fn spool_start() -> Self {
        Self {
            bytes: MAGIC.to_vec(),
        }
    }

    pub fn frame(&mut self, tag: u32, payload: &[u8]) {
        self.bytes.extend_from_slice(&tag.to_le_bytes());
        self.bytes
            .extend_from_slice(&(payload.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(payload);
    }

    pub fn string(&mut self, id: u64, s: &[u8]) {
        let mut p = Vec::with_capacity(8 + s.len());
        p.extend_from_slice(&id.to_le_bytes());
        p.extend_from_slice(s);
        self.frame(tag::STRING, &p);
    }

    pub fn calibration(&mut self, cupti_ns: u64, realtime_ns: i64, monotonic_ns: i64) {
        let mut p = [0u8; 24];
        p[0..8].copy_from_slice(&cupti_ns.to_le_bytes());
        p[8..16].copy_from_slice(&realtime_ns.to_le_bytes());
        p[16..24].copy_from_slice(&monotonic_ns.to_le_bytes());
        self.frame(tag::CALIBRATION, &p);
    }

    pub fn collect_mark(&mut self, on: bool, cupti_ns: u64) {
        let mut p = [0u8; 12];
        p[0..4].copy_from_slice(&u32::from(on).to_le_bytes());
        p[4..12].copy_from_slice(&cupti_ns.to_le_bytes());
        self.frame(tag::COLLECT, &p);
    }

    pub fn dropped(&mut self, context: u32, stream: u32, dropped: u64) {
        let mut p = [0u8; 16];
        p[0..4].copy_from_slice(&context.to_le_bytes());
        p[4..8].copy_from_slice(&stream.to_le_bytes());
        p[8..16].copy_from_slice(&dropped.to_le_bytes());
        self.frame(tag::DROPPED, &p);
    }

    pub fn buffer_end(&mut self, valid_bytes: u64, records: u32, skipped: u32) {
        let mut p = [0u8; 16];
        p[0..8].copy_from_slice(&valid_bytes.to_le_bytes());
        p[8..12].copy_from_slice(&records.to_le_bytes());
        p[12..16].copy_from_slice(&skipped.to_le_bytes());
        self.frame(tag::BUFFER, &p);
    }

    pub fn json<T: serde::Serialize>(&mut self, tag: u32, v: &T) {
        // Serialising plain structs of numbers and strings cannot fail.
        let p = serde_json::to_vec(v).unwrap_or_default();
        self.frame(tag, &p);
    }
}

/// One frame read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub tag: u32,
    pub payload: Vec<u8>,
}

/// Streams the frames of one spool file. After `next` returns `None`, `torn_tail` tells
/// whether the file ended inside a frame (the process died mid-write).
pub struct SpoolReader {
    path: PathBuf,
    r: BufReader<File>,
    pub torn_tail: bool,
    pub bytes_read: u64,
}

impl SpoolReader {
    pub fn open(path: &Path) -> Result<Self> {
        let f = File::open(path).map_err(|e| RecordError::io(path, e))?;
        let mut r = BufReader::with_capacity(1 << 20, f);
        let mut magic = [0u8; 8];
        match r.read_exact(&mut magic) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                return Err(RecordError::spool(
                    path,
                    "too short to be a gapscope spool file",
                ));
            }
            Err(e) => return Err(RecordError::io(path, e)),
        }
        if magic[..6] != MAGIC[..6] {
            return Err(RecordError::spool(
                path,
                "not a gapscope spool file (bad magic)",
            ));
        }
        if magic[7] != MAGIC[7] {
            return Err(RecordError::spool(
                path,
                format!(
                    "spool format version {} is not supported (this build reads {})",
                    magic[7], MAGIC[7]
                ),
            ));
        }
        Ok(Self {
            path: path.to_owned(),
            r,
            torn_tail: false,
            bytes_read: 8,
        })
    }

    /// The next whole frame; `Ok(None)` at the end of the file or at a torn tail.
    pub fn next_frame(&mut self) -> Result<Option<Frame>> {
        if self.torn_tail {
            return Ok(None);
        }
        let mut head = [0u8; 8];
        let mut got = 0;
        while got < 8 {
            match self.r.read(&mut head[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(RecordError::io(&self.path, e)),
            }
        }
        if got == 0 {
            return Ok(None);
        }
        if got < 8 {
            self.torn_tail = true;
            return Ok(None);
        }
        let tag = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let len = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        if len > MAX_FRAME_BYTES || tag == 0 || tag > 64 {
            // A zero-filled or garbled tail (a crash mid-write on some file systems): stop
            // here and report the file as truncated rather than reading garbage.
            self.torn_tail = true;
            return Ok(None);
        }
        let mut payload = vec![0u8; len as usize];
        match self.r.read_exact(&mut payload) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                self.torn_tail = true;
                return Ok(None);
            }
            Err(e) => return Err(RecordError::io(&self.path, e)),
        }
        self.bytes_read += 8 + len as u64;
        Ok(Some(Frame { tag, payload }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Little-endian field readers for frame payloads and records; out-of-range reads give 0
/// so a short record never panics (the decoder checks lengths first).
pub fn rd_u8(b: &[u8], off: usize) -> u8 {
    b.get(off).copied().unwrap_or(0)
}

pub fn rd_u16(b: &[u8], off: usize) -> u16 {
    b.get(off..off + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
        .unwrap_or(0)
}

pub fn rd_u32(b: &[u8], off: usize) -> u32 {
    b.get(off..off + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .unwrap_or(0)
}

pub fn rd_u64(b: &[u8], off: usize) -> u64 {
    b.get(off..off + 8)
        .map(|s| u64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]))
        .unwrap_or(0)
}

pub fn rd_i32(b: &[u8], off: usize) -> i32 {
    rd_u32(b, off) as i32
}

pub fn rd_i64(b: &[u8], off: usize) -> i64 {
    rd_u64(b, off) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(path: &Path, bytes: &[u8]) {
        let mut f = File::create(path).unwrap();
        f.write_all(bytes).unwrap();
    }

    fn frames(path: &Path) -> (Vec<Frame>, bool) {
        let mut r = SpoolReader::open(path).unwrap();
        let mut out = Vec::new();
        while let Some(f) = r.next_frame().unwrap() {
            out.push(f);
        }
        (out, r.torn_tail)
    }

    #[test]
    fn round_trip_and_torn_tails() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = FrameBuf::default();
        b.string(7, b"gemv_bf16");
        b.calibration(100, 200, 300);
        b.dropped(1, 2, 3);
        b.buffer_end(4096, 12, 1);
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(&b.bytes);
        let p = dir.path().join("1.spool");
        write(&p, &file);
        let (f, torn) = frames(&p);
        assert!(!torn);
        assert_eq!(f.len(), 4);
        assert_eq!(f[0].tag, tag::STRING);
        assert_eq!(rd_u64(&f[0].payload, 0), 7);
        assert_eq!(&f[0].payload[8..], b"gemv_bf16");
        assert_eq!(rd_i64(&f[1].payload, 16), 300);
        assert_eq!(rd_u64(&f[2].payload, 8), 3);
        assert_eq!(rd_u32(&f[3].payload, 8), 12);

        // Cut at every byte inside the last frame: the first three frames survive and the
        // tail is reported torn.
        let last = file.len() - (8 + 16);
        for cut in last + 1..file.len() {
            write(&p, &file[..cut]);
            let (f, torn) = frames(&p);
            assert_eq!(f.len(), 3, "cut at {cut}");
            assert!(torn, "cut at {cut}");
        }
        // A zero-filled tail is torn, not a frame.
        let mut z = file.clone();
        z.extend_from_slice(&[0u8; 64]);
        write(&p, &z);
        let (f, torn) = frames(&p);
        assert_eq!(f.len(), 4);
        assert!(torn);
    }

    #[test]
    fn bad_files_are_errors_that_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.spool");
        write(&p, b"GSP");
        let e = SpoolReader::open(&p).err().unwrap().to_string();
        assert!(e.contains("x.spool") && e.contains("too short"), "{e}");
        write(&p, b"NOTASPOOLFILE...");
        let e = SpoolReader::open(&p).err().unwrap().to_string();
        assert!(e.contains("bad magic"), "{e}");
        write(&p, b"GSPOOL\x00\x09");
        let e = SpoolReader::open(&p).err().unwrap().to_string();
        assert!(e.contains("version 9"), "{e}");
    }

    #[test]
    fn short_reads_give_zero() {
        assert_eq!(rd_u64(&[1, 2, 3], 0), 0);
        assert_eq!(rd_u32(&[1, 0, 0, 0], 0), 1);
        assert_eq!(rd_u16(&[], 5), 0);
    }
}
