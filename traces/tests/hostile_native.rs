//! Hostile native traces: a `.gst` is shared like any file, so a broken or crafted one must
//! be a one-line error (or a flagged truncated load when its tail is cut), never a panic, a
//! hang or a silently empty table; and writing one must never follow links planted in the
//! output directory.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::path::{Path, PathBuf};

use gapscope_traces::*;

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/v1.gst")
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// A copy of the golden v1 trace in a temporary directory.
fn golden_copy() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("g.gst");
    std::fs::create_dir(&dir).unwrap();
    for e in std::fs::read_dir(golden()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    (tmp, dir)
}

/// Byte ranges of each message's metadata in an IPC stream, in order.
fn metadata_ranges(stream: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 8 <= stream.len() {
        let mut len_at = at;
        if stream[at..at + 4] == [0xff; 4] {
            len_at += 4;
        }
        let len = i32::from_le_bytes(stream[len_at..len_at + 4].try_into().unwrap());
        if len <= 0 {
            break;
        }
        let meta = len_at + 4..len_at + 4 + len as usize;
        let msg = arrow_ipc::root_as_message(&stream[meta.clone()]).unwrap();
        at = meta.end + msg.bodyLength() as usize;
        out.push(meta);
    }
    out
}

/// Rewrites one field of buffer `buffer` in the first record batch of `file`: `field` 0 is
/// the offset, 1 the length.
fn patch_buffer(file: &Path, buffer: usize, field: usize, value: i64) {
    let mut bytes = std::fs::read(file).unwrap();
    let meta = metadata_ranges(&bytes)[1].clone();
    let at = {
        let msg = arrow_ipc::root_as_message(&bytes[meta.clone()]).unwrap();
        let buffers = msg.header_as_record_batch().unwrap().buffers().unwrap();
        assert!(buffer < buffers.len());
        buffers.bytes().as_ptr() as usize - bytes[meta.clone()].as_ptr() as usize
    };
    let pos = meta.start + at + 16 * buffer + 8 * field;
    bytes[pos..pos + 8].copy_from_slice(&value.to_le_bytes());
    std::fs::write(file, bytes).unwrap();
}

fn read_err(dir: &Path) -> String {
    let e = match read_trace(dir, &ReadOptions::default()) {
        Ok(t) => panic!(
            "must be an error; loaded {} kernels, notes {:?}",
            t.kernels.len(),
            t.manifest.notes
        ),
        Err(e) => e.to_string(),
    };
    assert!(!e.contains('\n'), "{e}");
    e
}

#[test]
fn buffers_outside_the_body_are_errors_not_panics() {
    // Before: arrow-buffer panicked ("the offset of the new Buffer cannot exceed the
    // existing length"), which the CLI turned into exit 101.
    for (buffer, field, value) in [
        (1, 1, 1 << 40),
        (1, 0, 1 << 40),
        (3, 0, -8),
        (3, 1, i64::MAX),
        (5, 0, i64::MAX),
    ] {
        let (_tmp, dir) = golden_copy();
        patch_buffer(&dir.join("kernels.arrows"), buffer, field, value);
        let e = read_err(&dir);
        assert!(
            e.contains("kernels.arrows") && e.contains("outside the"),
            "{buffer}/{field}: {e}"
        );
    }
}

#[test]
fn compressed_batches_are_errors_not_an_empty_truncated_table() {
    // Before: the batch failed to decode, which read as "truncated after 0 complete
    // batches": a trace with 0 kernels, exit 0.
    for codec in ["lz4", "zstd"] {
        let (_tmp, dir) = golden_copy();
        std::fs::copy(
            data(&format!("kernels-{codec}.arrows")),
            dir.join("kernels.arrows"),
        )
        .unwrap();
        let e = read_err(&dir);
        assert!(e.contains("compressed"), "{codec}: {e}");
    }
}

#[test]
fn undecodable_batch_metadata_is_an_error_but_a_cut_tail_loads() {
    let (_tmp, dir) = golden_copy();
    let k = dir.join("kernels.arrows");
    let full = std::fs::read(&k).unwrap();
    let meta = metadata_ranges(&full)[1].clone();
    let mut bad = full.clone();
    bad[meta.start..meta.start + 16].fill(0xab);
    std::fs::write(&k, &bad).unwrap();
    let e = read_err(&dir);
    assert!(e.contains("metadata"), "{e}");

    // The same batch cut short at the end of the file is a truncated tail.
    std::fs::write(&k, &full[..meta.end + 10]).unwrap();
    let t = read_trace(&dir, &ReadOptions::default()).unwrap();
    assert!(t.manifest.truncated);
    assert_eq!(t.kernels.len(), 0);
    assert!(
        t.manifest
            .notes
            .iter()
            .any(|n| n.contains("kernels: truncated after 0 complete batches")),
        "{:?}",
        t.manifest.notes
    );
}

#[test]
fn a_row_count_the_body_cannot_hold_is_an_error() {
    let (_tmp, dir) = golden_copy();
    let k = dir.join("kernels.arrows");
    let mut bytes = std::fs::read(&k).unwrap();
    let meta = metadata_ranges(&bytes)[1].clone();
    // The batch's `length` field holds 4; find it as the only little-endian 4_i64 right
    // before the nodes and set it to 2^40.
    let msg = arrow_ipc::root_as_message(&bytes[meta.clone()]).unwrap();
    assert_eq!(msg.header_as_record_batch().unwrap().length(), 4);
    let hits: Vec<usize> = bytes[meta.clone()]
        .windows(8)
        .enumerate()
        .filter(|(_, w)| *w == 4i64.to_le_bytes())
        .map(|(i, _)| i)
        .collect();
    let mut patched = false;
    for at in hits {
        let mut copy = bytes.clone();
        copy[meta.start + at..meta.start + at + 8].copy_from_slice(&(1i64 << 40).to_le_bytes());
        let m = arrow_ipc::root_as_message(&copy[meta.clone()]).unwrap();
        if m.header_as_record_batch().unwrap().length() == 1 << 40 {
            bytes = copy;
            patched = true;
            break;
        }
    }
    assert!(patched);
    std::fs::write(&k, bytes).unwrap();
    let e = read_err(&dir);
    assert!(e.contains("declares 1099511627776 rows"), "{e}");
}

#[cfg(unix)]
#[test]
fn a_fifo_in_place_of_a_stream_is_refused_without_blocking() {
    let (_tmp, dir) = golden_copy();
    let k = dir.join("kernels.arrows");
    std::fs::remove_file(&k).unwrap();
    let st = std::process::Command::new("mkfifo")
        .arg(&k)
        .status()
        .unwrap();
    assert!(st.success());
    let e = read_err(&dir);
    assert!(e.contains("not a regular file"), "{e}");
}

#[test]
fn the_row_limit_refuses_large_traces() {
    let opts = ReadOptions {
        max_rows: Some(5),
        ..Default::default()
    };
    let e = read_trace(&golden(), &opts).unwrap_err().to_string();
    assert!(e.contains("more than 5 events"), "{e}");
    let opts = ReadOptions {
        max_rows: Some(11),
        ..Default::default()
    };
    // 4 kernels, 1 memop, 4 launches, 1 marker and 1 sample.
    assert_eq!(read_trace(&golden(), &opts).unwrap().kernels.len(), 4);
}

fn small_trace() -> Trace {
    let mut t = Trace::new(Manifest::new("synthetic"));
    let name = t.strings.intern("k");
    t.kernels.push(KernelRow {
        name,
        gpu_start_ns: 10,
        gpu_end_ns: 20,
        ..Default::default()
    });
    t
}

#[cfg(unix)]
#[test]
fn writing_over_a_trace_never_follows_its_links() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();
    let out = tmp.path().join("out.gst");
    write_trace(&out, &small_trace()).unwrap();
    for f in ["kernels.arrows", "manifest.json.tmp"] {
        let _ = std::fs::remove_file(out.join(f));
        std::os::unix::fs::symlink(&victim, out.join(f)).unwrap();
    }
    // The file the links pointed at kept its bytes; the trace was written in their place.
    let untouched = || {
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(
            read_trace(&out, &ReadOptions::default())
                .unwrap()
                .kernels
                .len(),
            1
        );
    };
    // Both the whole-trace writer and the streaming writer replace the links, not the file
    // they point at.
    write_trace(&out, &small_trace()).unwrap();
    untouched();
    std::os::unix::fs::symlink(&victim, out.join("memops.arrows.link")).unwrap();
    std::fs::remove_file(out.join("memops.arrows")).unwrap();
    std::os::unix::fs::symlink(&victim, out.join("memops.arrows")).unwrap();
    let t = small_trace();
    let mut w = TraceWriter::create(&out, t.manifest.clone()).unwrap();
    w.append_strings(&t.strings).unwrap();
    w.append_kernels(&t.kernels).unwrap();
    w.finish().unwrap();
    untouched();
}

#[cfg(unix)]
#[test]
fn outputs_that_are_links_or_foreign_directories_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("elsewhere");
    std::fs::create_dir(&target).unwrap();
    let link = tmp.path().join("link.gst");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let e = write_trace(&link, &small_trace()).unwrap_err().to_string();
    assert!(e.contains("symbolic link"), "{e}");
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);

    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join("notes.txt"), b"mine").unwrap();
    let e = write_trace(&home, &small_trace()).unwrap_err().to_string();
    assert!(e.contains("not a gapscope trace"), "{e}");
    // A manifest.json that is not gapscope's does not make a directory a trace.
    std::fs::write(home.join("manifest.json"), b"{\"name\": \"my-app\"}").unwrap();
    let e = write_trace(&home, &small_trace()).unwrap_err().to_string();
    assert!(e.contains("not a gapscope trace"), "{e}");
    assert_eq!(std::fs::read(home.join("notes.txt")).unwrap(), b"mine");
    // Nothing is left behind beside the output either.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 3, "{left:?}");
}
