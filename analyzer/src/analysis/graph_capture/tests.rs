//! The capture mapping on hand-built traces: what counts as a captured launch, the checks
//! that refuse a replay, and the choice between several captured graphs.

use gapscope_traces::{
    KernelRow, LaunchApi, LaunchRow, MarkerRow, MarkerSource, MemopKind, MemopRow, ScopeKind,
    ScopeRow, Trace,
};

use super::*;

fn launch(t: &mut Trace, name: &str, corr: u64, s: i64, e: i64) {
    let name = t.strings.intern(name);
    t.launches.push(LaunchRow {
        pid: 1,
        tid: 1,
        correlation: corr,
        name,
        api: LaunchApi::Runtime as u8,
        host_start_ns: s,
        host_end_ns: e,
    });
}

fn scope(t: &mut Trace, name: &str, kind: ScopeKind, s: i64, e: i64) {
    let name = t.strings.intern(name);
    t.scopes.push(ScopeRow {
        pid: 1,
        tid: 1,
        name,
        kind: kind as u8,
        host_start_ns: s,
        host_end_ns: e,
    });
}

fn marker(t: &mut Trace, name: &str, s: i64, e: i64) {
    let name = t.strings.intern(name);
    t.markers.push(MarkerRow {
        name,
        source: MarkerSource::KinetoUserAnnotation as u8,
        tid: 1,
        host_start_ns: s,
        host_end_ns: e,
        ..Default::default()
    });
}

/// One capture at `at`: a kernel in `aten::mm`, a runtime launch with a driver launch inside
/// it in `aten::add`, a copy in `aten::copy_`, all in decoder layer 0; then a launch after
/// the capture ended.
fn capture_into(t: &mut Trace, name: Option<&str>, at: i64) {
    if let Some(n) = name {
        marker(t, n, at, at + 1000);
    }
    launch(t, "cudaStreamBeginCapture", 1, at + 10, at + 11);
    scope(
        t,
        "nn.Module: LlamaDecoderLayer_0",
        ScopeKind::Module,
        at + 20,
        at + 500,
    );
    scope(t, "aten::mm", ScopeKind::Op, at + 30, at + 60);
    launch(t, "cudaLaunchKernel", 2, at + 40, at + 45);
    scope(t, "aten::add", ScopeKind::Op, at + 70, at + 90);
    launch(t, "cudaLaunchKernelExC", 3, at + 75, at + 85);
    launch(t, "cuLaunchKernelEx", 4, at + 78, at + 80);
    scope(t, "aten::copy_", ScopeKind::Op, at + 100, at + 120);
    launch(t, "cudaMemcpyAsync", 5, at + 105, at + 110);
    launch(t, "cudaStreamEndCapture", 6, at + 600, at + 610);
    launch(t, "cudaLaunchKernel", 7, at + 700, at + 705);
}

fn capture(name: Option<&str>) -> GraphCapture {
    let mut t = Trace::default();
    t.strings.intern("");
    capture_into(&mut t, name, 0);
    GraphCapture::of_trace("cap.json", &t, None)
}

/// A replay trace: one graph launch inside a step marker `step`, replaying `kinds` in GPU
/// order (true: kernel, false: copy).
fn replay(step: &str, kinds: &[bool]) -> Trace {
    let mut t = Trace::default();
    t.strings.intern("");
    marker(&mut t, step, 1900, 3000);
    launch(&mut t, "cudaGraphLaunch", 99, 2000, 2010);
    let k = t.strings.intern("k");
    for (i, &kernel) in kinds.iter().enumerate() {
        let at = 5000 + 100 * i as i64;
        if kernel {
            t.kernels.push(KernelRow {
                correlation: 99,
                name: k,
                gpu_start_ns: at,
                gpu_end_ns: at + 50,
                ..Default::default()
            });
        } else {
            t.memops.push(MemopRow {
                correlation: 99,
                name: k,
                kind: MemopKind::DtoD as u8,
                gpu_start_ns: at,
                gpu_end_ns: at + 50,
                ..Default::default()
            });
        }
    }
    t
}

#[test]
fn captured_launches_are_the_calls_between_begin_and_end_each_once() {
    let c = capture(Some("capture_8_FULL"));
    assert_eq!(c.graphs.len(), 1);
    let g = &c.graphs[0];
    assert_eq!(
        g.launches, 3,
        "the driver call inside the runtime call is one launch"
    );
    assert_eq!(g.size, Some(8));
    let kinds: Vec<SlotKind> = g.slots.iter().map(|s| s.kind).collect();
    assert_eq!(
        kinds,
        [SlotKind::Kernel, SlotKind::Kernel, SlotKind::Memcpy]
    );
    assert_eq!(
        g.slots[1].keys[group_index(GroupBy::Op)].as_deref(),
        Some("aten::add")
    );
    // SGLang's file name declares the size when no marker does.
    let mut t = Trace::default();
    t.strings.intern("");
    capture_into(&mut t, None, 0);
    let c = GraphCapture::of_trace("x", &t, Some("bs_4_rank0.json.gz"));
    assert_eq!(c.graphs[0].size, Some(4));
}

#[test]
fn replays_map_by_position() {
    let c = capture(Some("capture_8_FULL"));
    let t = replay("execute_context_0(0)_generation_8(8)", &[true, true, false]);
    let m = CaptureMap::build(&t, &c);
    assert_eq!(m.refusal(), None);
    assert_eq!((m.graph_launches, m.launches_mapped, m.mapped()), (1, 1, 3));
    assert_eq!(m.key(0, GroupBy::Op), Some(Some("aten::mm")));
    assert_eq!(m.key(1, GroupBy::Op), Some(Some("aten::add")));
    assert_eq!(m.key(-1, GroupBy::Op), Some(Some("aten::copy_")));
    assert_eq!(m.key(-1, GroupBy::Layer), Some(Some("layer 0")));
    assert_eq!(
        m.key(0, GroupBy::Module),
        Some(Some("nn.Module: LlamaDecoderLayer"))
    );
}

#[test]
fn a_replay_of_other_kinds_count_or_size_is_refused() {
    let c = capture(Some("capture_8_FULL"));
    let why = |t: &Trace| CaptureMap::build(t, &c).refusal().unwrap_or_default();
    let w = why(&replay(
        "execute_context_0(0)_generation_8(8)",
        &[false, true, true],
    ));
    assert!(
        w.contains("position 0 of its replay is a copy, the capture launched a kernel there"),
        "{w}"
    );
    let w = why(&replay(
        "execute_context_0(0)_generation_8(8)",
        &[true, true],
    ));
    assert!(w.contains("runs 2 kernels and memops"), "{w}");
    let w = why(&replay(
        "execute_context_0(0)_generation_16(16)",
        &[true, true, false],
    ));
    assert!(
        w.contains("declares 16 tokens, the graph was captured for 8"),
        "{w}"
    );
    // Steps that declare nothing: the count and kinds decide.
    let t = replay("decode_step", &[true, true, false]);
    assert_eq!(CaptureMap::build(&t, &c).refusal(), None);
}

#[test]
fn of_several_graphs_that_fit_the_smallest_size_that_holds_the_step_is_taken() {
    let mut t = Trace::default();
    t.strings.intern("");
    capture_into(&mut t, Some("capture_16_FULL"), 0);
    capture_into(&mut t, Some("capture_8_FULL"), 10_000);
    let c = GraphCapture::of_trace("cap.json", &t, None);
    let sizes: Vec<Option<u32>> = c.graphs.iter().map(|g| g.size).collect();
    assert_eq!(sizes, [Some(16), Some(8)]);
    let m = CaptureMap::build(
        &replay("execute_context_0(0)_generation_5(5)", &[true, true, false]),
        &c,
    );
    assert_eq!(m.slot_of.get(&0), Some(&(1, 0)), "the graph of 8");
    let m = CaptureMap::build(
        &replay(
            "execute_context_0(0)_generation_12(12)",
            &[true, true, false],
        ),
        &c,
    );
    assert_eq!(m.slot_of.get(&0), Some(&(0, 0)), "the graph of 16");
    // Without a declared step size nothing tells them apart.
    let m = CaptureMap::build(&replay("decode_step", &[true, true, false]), &c);
    let w = m.refusal().unwrap_or_default();
    assert!(w.contains("2 captured graphs of 3 launches fit"), "{w}");
}
