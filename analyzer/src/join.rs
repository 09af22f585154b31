//! Joins an engine's own launch records (op, layer, bucket, bytes, FLOPs, steps) onto a
//! recording of the same run by another tool (a CUPTI recording, an nsys export). The engine
//! issues everything on one stream in a fixed order and numbers its launches in that order, so
//! the join walks the engine's launches and the recorded kernels of the busiest stream side by
//! side, matching by name. A library call the engine records once (`cublas*`) covers every
//! recorded kernel up to the next engine launch's name; a kernel the engine did not record
//! (or a record the tool missed) is skipped by a bounded resynchronisation, and a longer
//! stretch of kernels the engine did not trace (another batch size's warm-up) by re-anchoring
//! on the next run of engine names.
//!
//! The walk goes backwards from the end of both. A bench traces its measured repeats, not the
//! warm-up run before them (nor the timing calibration before that), and a warm-up launches
//! exactly the same kernels: walking forwards would put the measured run's metadata on the
//! warm-up's kernels, whose durations differ (cold caches, first graph replays). From the end,
//! the engine's last traced launch meets the recording's last kernel, and whatever ran before
//! the traced launches is left alone.

use gapscope_traces::{MarkerRow, MarkerSource, MarkerTable, Phase, StrId, Trace};
use std::collections::HashMap;

/// What the join did, for the user to judge it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct JoinReport {
    pub engine_launches: usize,
    pub recorded_kernels: usize,
    /// (device, stream) of the recorded kernels that were walked.
    pub stream: Option<(u32, u32)>,
    /// Recorded kernels that received engine metadata.
    pub joined: usize,
    /// Engine library calls (cuBLAS) and the recorded kernels they covered.
    pub library_calls: usize,
    pub library_kernels: usize,
    /// Recorded kernels skipped while resynchronising (not launched by the engine's records).
    pub skipped_recorded: usize,
    /// Engine launches with no recorded kernel.
    pub unmatched_engine: usize,
    /// Step markers carried over (their times are the recorded kernels' times).
    pub steps: usize,
    /// Kernels of the walked stream before the first and after the last joined one (what ran
    /// outside the traced launches: warm-up runs, calibration).
    pub recorded_before: usize,
    pub recorded_after: usize,
    /// Engine memory copies (its D2D state copies) and the recorded copies they were placed
    /// on: the first recorded copy of the same kind after the recorded kernel of the engine
    /// launch before it, and before the one after it. A copy with no such match is unmatched.
    pub engine_memops: usize,
    pub joined_memops: usize,
    /// Decode steps the engine ran but did not trace launch by launch (`--timing-sample`),
    /// between traced ones, and the recorded kernels passed over for them: as many per step
    /// as the traced step after the gap took in the recording.
    pub untraced_steps: usize,
    pub untraced_kernels: usize,
    /// Recorded kernels replayed from CUDA graphs, left out of the walk because the engine
    /// traced only eager launches: its untraced steps (launch-timed steps run eagerly).
    pub graph_replayed: usize,
}

/// Least share of the engine's launches a join must match by default: a recording of the
/// same run matches all of them (the H200 joins of runs 33 to 36 matched 100%), one of
/// another run a few percent by chance.
pub const DEFAULT_MIN_MATCH: f64 = 0.9;

/// One line for the user: what was joined, skipped, left alone and placed.
impl std::fmt::Display for JoinReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "joined {} recorded kernels from {} engine launches ({} library calls over {} kernels); {} recorded kernels skipped, {} engine launches unmatched; {} recorded kernels before the joined ones and {} after left alone; {} of {} engine copies placed; {} untraced steps passed over ({} kernels), {} graph-replayed kernels left out; {} steps",
            self.joined,
            self.engine_launches,
            self.library_calls,
            self.library_kernels,
            self.skipped_recorded,
            self.unmatched_engine,
            self.recorded_before,
            self.recorded_after,
            self.joined_memops,
            self.engine_memops,
            self.untraced_steps,
            self.untraced_kernels,
            self.graph_replayed,
            self.steps
        )
    }
}

impl JoinReport {
    /// The note a joined trace's manifest carries: where its engine metadata came from and
    /// what the join did.
    pub fn note(&self, engine_source: &str) -> String {
        format!(
            "engine metadata joined from {engine_source} by launch order, from the end: {} of {} engine launches, {} recorded kernels skipped, {} before the first joined kernel (untraced warm-up, calibration) and {} after the last left alone; {} of {} engine copies placed on recorded copies (steps re-timed to include them); {} untraced steps between traced ones passed over ({} recorded kernels); {} graph-replayed kernels (untraced steps) left out",
            self.engine_launches - self.unmatched_engine,
            self.engine_launches,
            self.skipped_recorded,
            self.recorded_before,
            self.recorded_after,
            self.joined_memops,
            self.engine_memops,
            self.untraced_steps,
            self.untraced_kernels,
            self.graph_replayed
        )
    }

    /// Share of the engine's launches that found their recorded kernel.
    pub fn match_share(&self) -> f64 {
        if self.engine_launches == 0 {
            0.0
        } else {
            (self.engine_launches - self.unmatched_engine) as f64 / self.engine_launches as f64
        }
    }

    /// Whether the join is good enough to write: at least `min_match` of the engine's
    /// launches matched. The error says how many did, in one line.
    pub fn check(&self, min_match: f64) -> Result<(), String> {
        let share = self.match_share();
        if self.joined > 0 && share >= min_match {
            return Ok(());
        }
        Err(format!(
            "only {} of {} engine launches ({:.1}%) matched a recorded kernel, below the {:.0}% \
             a recording of the same run reaches; is it a recording of another run? \
             (--min-match lowers the threshold)",
            self.engine_launches - self.unmatched_engine,
            self.engine_launches,
            100.0 * share,
            100.0 * min_match
        ))
    }
}

/// The most untraced decode steps passed over between two traced ones (a step counter jump
/// larger than this is not a sampling gap).
const MAX_UNTRACED_STEPS: i64 = 4096;

/// How far the walk looks ahead to resynchronise, how many kernels one library call may
/// cover, and how many engine names in a row re-anchor the walk past a longer stretch.
#[derive(Debug, Clone, Copy)]
pub struct JoinSettings {
    pub max_skip: usize,
    pub max_library_kernels: usize,
    pub anchor: usize,
}

impl Default for JoinSettings {
    fn default() -> Self {
        Self {
            max_skip: 16,
            max_library_kernels: 16,
            anchor: 8,
        }
    }
}

/// The offset past `b` (beyond `min_off`) where the recording next holds `want` in a row.
fn find_anchor(rnames: &[String], b: usize, min_off: usize, want: &[String]) -> Option<usize> {
    if want.is_empty() {
        return None;
    }
    // The last offset at which `want` still fits: a bounded range, whatever `min_off` is.
    let last = rnames.len().checked_sub(want.len())?.checked_sub(b)?;
    (min_off..=last).find(|&o| rnames[b + o..b + o + want.len()] == *want)
}

fn is_library(name: &str) -> bool {
    name.starts_with("cublas")
}

/// Copies the engine's metadata onto `recorded` in place and adds the engine's step markers
/// on the recorded clock. The passes: the walk order of both sides ([`WalkOrder`]), the name
/// walk that pairs them ([`walk`]), the metadata copy, the memop placement ([`join_memops`])
/// and the step markers' carry-over ([`carry_steps`]).
pub fn join_engine_metadata(engine: &Trace, recorded: &mut Trace, s: JoinSettings) -> JoinReport {
    let mut rep = JoinReport {
        engine_launches: engine.kernels.len(),
        recorded_kernels: recorded.kernels.len(),
        ..JoinReport::default()
    };
    let Some(order) = WalkOrder::of(engine, recorded, &mut rep) else {
        return rep;
    };
    let steps = EngineSteps::of(engine);
    let assign = walk(engine, recorded, &order, &steps, s, &mut rep);
    copy_metadata(engine, recorded, &assign);
    rep.joined = assign.len();
    let memops = join_memops(engine, recorded, order.stream, &assign);
    rep.engine_memops = engine.memops.len;
    rep.joined_memops = memops.len();
    carry_steps(
        engine,
        recorded,
        order.stream,
        &steps,
        &assign,
        &memops,
        &mut rep,
    );
    rep
}

/// Both sides in walk order, latest first: the engine's launches, and the recorded kernels
/// of the stream that carries the engine's work.
struct WalkOrder {
    /// The recording's busiest (device, stream).
    stream: (u32, u32),
    /// Engine kernel rows.
    eidx: Vec<usize>,
    /// Recorded kernel rows on `stream`.
    ridx: Vec<usize>,
}

impl WalkOrder {
    /// `None` when the recording has no kernels (every engine launch is then unmatched).
    fn of(engine: &Trace, recorded: &Trace, rep: &mut JoinReport) -> Option<Self> {
        let ek = &engine.kernels;
        let mut eidx: Vec<usize> = (0..ek.len()).collect();
        eidx.sort_by_key(|&i| (ek.correlation[i], ek.gpu_start_ns[i]));
        // Backwards: see the module's doc.
        eidx.reverse();

        // The busiest (device, stream) of the recording carries the engine's work.
        let rk = &recorded.kernels;
        let mut per_stream: HashMap<(u32, u32), usize> = HashMap::new();
        for i in 0..rk.len() {
            *per_stream.entry((rk.device[i], rk.stream[i])).or_default() += 1;
        }
        let Some((&stream, _)) = per_stream
            .iter()
            .max_by_key(|(k, n)| (**n, std::cmp::Reverse(**k)))
        else {
            rep.unmatched_engine = eidx.len();
            return None;
        };
        rep.stream = Some(stream);
        // When the engine traced only eager launches (its launch-timed steps run eagerly), the
        // recording's graph-replayed kernels are its untraced steps (`--timing-sample`): they are
        // left out of the walk, whose kernels then line up step for step.
        let engine_eager = (0..ek.len()).all(|i| ek.graph_id[i] == 0);
        let mut ridx: Vec<usize> = (0..rk.len())
            .filter(|&i| (rk.device[i], rk.stream[i]) == stream)
            .filter(|&i| {
                let replayed = engine_eager && rk.graph_id[i] != 0;
                rep.graph_replayed += usize::from(replayed);
                !replayed
            })
            .collect();
        ridx.sort_by_key(|&i| (rk.gpu_start_ns[i], rk.correlation[i]));
        ridx.reverse();
        Some(Self { stream, eidx, ridx })
    }
}

/// The engine's step markers, to find the step of a launch and the untraced steps between
/// traced ones.
struct EngineSteps<'a> {
    markers: &'a MarkerTable,
    /// (start, end, marker row) of the timed markers, sorted.
    windows: Vec<(i64, i64, usize)>,
    /// Decode steps per run (the engine's settings in the manifest); unknown: `None`.
    ntg: Option<i64>,
}

impl<'a> EngineSteps<'a> {
    fn of(engine: &'a Trace) -> Self {
        // Each engine launch's step marker: a gap in the step numbers between two traced
        // steps is steps that ran untraced (sampled timing), whose kernels the recording
        // holds.
        let em = &engine.markers;
        let mut windows: Vec<(i64, i64, usize)> = (0..em.len())
            .filter(|&i| em.gpu_start_ns[i] != i64::MIN)
            .map(|i| (em.gpu_start_ns[i], em.gpu_end_ns[i], i))
            .collect();
        windows.sort();
        let ntg = engine
            .manifest
            .engine_config
            .as_ref()
            .and_then(|c| c.get("settings")?.get("ntg")?.as_i64());
        Self {
            markers: em,
            windows,
            ntg,
        }
    }

    /// The marker whose window holds instant `t`.
    fn marker_of(&self, t: i64) -> Option<usize> {
        let pos = self.windows.partition_point(|w| w.0 <= t);
        let &(ws, we, m) = self.windows.get(pos.checked_sub(1)?)?;
        (ws..=we).contains(&t).then_some(m)
    }

    fn is_decode(&self, m: usize) -> bool {
        self.markers.phase[m] == Phase::Decode as u8
    }

    /// The decode steps a run still ran after its traced step `m`, untraced: the run's
    /// prefill is the latest prefill marker before `m`, and a run has `ntg` decode steps.
    fn trailing_after(&self, m: usize) -> i64 {
        let em = self.markers;
        let prefill = (0..em.len())
            .filter(|&i| em.phase[i] == Phase::Prefill as u8 && em.step[i] < em.step[m])
            .map(|i| em.step[i])
            .max();
        match (self.ntg, prefill) {
            (Some(ntg), Some(p)) => (p + ntg - em.step[m]).clamp(0, MAX_UNTRACED_STEPS),
            _ => 0,
        }
    }
}

/// The name walk: pairs recorded kernel rows with engine kernel rows, as
/// (recorded row, engine row, carries the cost), resynchronising, re-anchoring and passing
/// over untraced steps as the module's doc describes; counts what it did in `rep`.
#[expect(
    clippy::too_many_lines,
    reason = "the backward walk keeps its cursors into both traces in locals; its branches are the match cases of one step of the walk"
)]
fn walk(
    engine: &Trace,
    recorded: &Trace,
    order: &WalkOrder,
    steps: &EngineSteps,
    s: JoinSettings,
    rep: &mut JoinReport,
) -> Vec<(usize, usize, bool)> {
    let (ek, em) = (&engine.kernels, &engine.markers);
    let (eidx, ridx) = (&order.eidx, &order.ridx);
    let marker_of = |t: i64| steps.marker_of(t);
    let is_decode = |m: usize| steps.is_decode(m);
    let trailing_after = |m: usize| steps.trailing_after(m);
    // (With graph replays left out, the untraced steps are gone from the walk already.)
    let pass_untraced = rep.graph_replayed == 0;
    let ename = |i: usize| engine.strings.get(ek.name[i]).to_owned();
    let engine_names: std::collections::HashSet<&str> = (0..ek.len())
        .map(|i| engine.strings.get(ek.name[i]))
        .filter(|n| !is_library(n))
        .collect();
    let rnames: Vec<String> = ridx
        .iter()
        .map(|&i| recorded.strings.get(recorded.kernels.name[i]).to_owned())
        .collect();
    // recorded row -> engine row
    let mut assign: Vec<(usize, usize, bool)> = Vec::new(); // (recorded row, engine row, carries cost)
    // The first and last walk positions that were joined.
    let mut walked: Option<(usize, usize)> = None;
    let mut mark = |j: usize| {
        walked = Some(walked.map_or((j, j), |(lo, hi)| (lo.min(j), hi.max(j))));
    };
    // From walk position `b`, the first recorded kernel named `name` and the recorded kernels
    // per step: the distance to that name's next occurrence (a step's last kernel recurs once
    // a step).
    let period = |b: usize, name: &str| -> Option<(usize, usize)> {
        let mut at = (b..rnames.len()).filter(|&j| rnames[j] == name);
        let first = at.next()?;
        Some((first, at.next()? - first))
    };
    // The next `anchor` engine names from walk step `a`, up to a library call: what a longer
    // untraced stretch is passed by (re-anchoring, and the end of a run's untraced steps).
    let anchor_names = |a: usize| -> Vec<String> {
        eidx[a..]
            .iter()
            .take(s.anchor)
            .map(|&i| ename(i))
            .take_while(|n| !is_library(n))
            .collect()
    };
    // (the step's marker, the walk position where its first-walked kernel matched)
    let mut current: Option<(usize, usize)> = None;
    let mut untraced_at_end = 0usize;
    let (mut a, mut b) = (0usize, 0usize);
    while a < eidx.len() && b < ridx.len() {
        let marker = marker_of(ek.gpu_start_ns[eidx[a]]);
        if marker != current.map(|c| c.0) {
            // Passes `steps` untraced steps of `per` recorded kernels from walk position
            // `from`; the position after them, if they fit in the recording.
            let mut pass = |from: usize, steps: i64, per: usize| -> Option<usize> {
                let n = steps as usize * per;
                (per > 0 && from + n <= ridx.len()).then(|| {
                    rep.untraced_steps += steps as usize;
                    rep.untraced_kernels += n;
                    from + n
                })
            };
            match (current, marker) {
                // Untraced decode steps between two traced steps (or the prefill): as many
                // recorded kernels each as the later traced step took.
                (Some((later, start)), Some(earlier)) if pass_untraced && is_decode(later) => {
                    let gap = em.step[later] - em.step[earlier] - 1;
                    if (1..=MAX_UNTRACED_STEPS).contains(&gap) {
                        b = pass(b, gap, b - start).unwrap_or(b);
                    }
                }
                // Untraced decode steps after a run's last traced one: at the end of the
                // recording, or before the next run's prefill (and any untraced warm-up run
                // of another batch size before that). The run's end is where the traced
                // step's last kernels next appear, as its untraced steps repeat them.
                (later, Some(earlier))
                    if pass_untraced
                        && is_decode(earlier)
                        && later.is_none_or(|(l, _)| !is_decode(l)) =>
                {
                    let steps = trailing_after(earlier);
                    let want = anchor_names(a);
                    let end = (steps > 0)
                        .then(|| find_anchor(&rnames, b, 0, &want))
                        .flatten();
                    if let Some((off, (first, per))) =
                        end.and_then(|off| Some((off, period(b + off, &want[0])?)))
                    {
                        rep.skipped_recorded += off;
                        if let Some(after) = pass(first, steps, per) {
                            if current.is_none() {
                                // The last run's untraced steps at the recording's end:
                                // passed over, not left alone after the joined kernels.
                                untraced_at_end = after - first;
                            }
                            b = after;
                        }
                    }
                }
                _ => {}
            }
            current = marker.map(|m| (m, b));
        }
        let name = ename(eidx[a]);
        if is_library(&name) {
            let next = eidx[a + 1..]
                .iter()
                .map(|&i| ename(i))
                .find(|n| !is_library(n));
            let mut end = b + 1;
            while end < ridx.len()
                && end - b < s.max_library_kernels
                && next.as_deref() != Some(rnames[end].as_str())
            {
                end += 1;
            }
            // The call's earliest kernel (the walk's last) carries its bytes and FLOPs.
            for (j, &r) in ridx.iter().enumerate().take(end).skip(b) {
                assign.push((r, eidx[a], j + 1 == end));
                mark(j);
            }
            rep.library_calls += 1;
            rep.library_kernels += end - b;
            a += 1;
            b = end;
            continue;
        }
        // A name matches when the next one does too (or is a library call or the end): at the
        // edge of an untraced run of the same kernels, one equal name is not enough. Recorded
        // kernels the engine never launches (another library's, a probe) do not count as next.
        let next = eidx.get(a + 1).map(|&i| ename(i));
        let fits = |j: usize| {
            rnames[j] == name
                && match &next {
                    None => true,
                    Some(n) if is_library(n) => true,
                    Some(n) => rnames[j + 1..]
                        .iter()
                        .take(s.max_skip.saturating_add(1))
                        .find(|r| engine_names.contains(r.as_str()))
                        .is_some_and(|r| r == n),
                }
        };
        if fits(b) {
            assign.push((ridx[b], eidx[a], true));
            mark(b);
            a += 1;
            b += 1;
            continue;
        }
        // Resynchronise: a recorded kernel the engine did not launch, or an engine launch the
        // tool did not record.
        // Bounded by what is left of the recording, so a huge --max-skip costs nothing.
        let reach = s.max_skip.min(ridx.len().saturating_sub(b + 1));
        if let Some(off) = (1..=reach).find(|&o| fits(b + o)) {
            rep.skipped_recorded += off;
            b += off;
            continue;
        }
        // A longer stretch the engine did not trace: the next `anchor` engine names (up to a
        // library call) in a row, further on.
        let want = anchor_names(a);
        // Too few names (a library call among them) anchor nothing: no search.
        let enough = want.len() == s.anchor.min(eidx.len() - a);
        let anchored = if enough {
            find_anchor(&rnames, b, s.max_skip.saturating_add(1), &want)
        } else {
            None
        };
        match anchored {
            Some(off) => {
                rep.skipped_recorded += off;
                b += off;
            }
            None => {
                rep.unmatched_engine += 1;
                a += 1;
            }
        }
    }
    rep.unmatched_engine += eidx.len() - a;
    if let Some((lo, hi)) = walked {
        // The walk runs backwards: its first position is the latest kernel.
        rep.recorded_after = lo.saturating_sub(untraced_at_end);
        rep.recorded_before = ridx.len() - 1 - hi;
    }
    assign
}

/// Copies the engine's op, bucket, layer, bytes and FLOPs onto the recorded kernels the walk
/// paired, interning the engine's strings into the recording's table.
fn copy_metadata(engine: &Trace, recorded: &mut Trace, assign: &[(usize, usize, bool)]) {
    let ek = &engine.kernels;
    let mut interned: HashMap<StrId, StrId> = HashMap::new();
    let mut intern = |id: StrId, rec: &mut Trace| -> StrId {
        *interned
            .entry(id)
            .or_insert_with(|| rec.strings.intern(engine.strings.get(id)))
    };
    for &(r, e, carries) in assign {
        let op = intern(ek.op[e], recorded);
        let bucket = intern(ek.bucket[e], recorded);
        let k = &mut recorded.kernels;
        k.op[r] = op;
        k.bucket[r] = bucket;
        k.layer[r] = ek.layer[e];
        k.bytes[r] = if carries { ek.bytes[e] } else { 0 };
        k.flops[r] = if carries { ek.flops[e] } else { 0 };
    }
}

/// Adds the engine's steps to the recording as engine markers, each re-timed to span the
/// recorded kernels and copies of its launches.
fn carry_steps(
    engine: &Trace,
    recorded: &mut Trace,
    stream: (u32, u32),
    steps: &EngineSteps,
    assign: &[(usize, usize, bool)],
    memops: &[(usize, usize)],
    rep: &mut JoinReport,
) {
    let (ek, em) = (&engine.kernels, &engine.markers);
    let mut span: HashMap<usize, (i64, i64)> = HashMap::new();
    // An engine launch at `t` that ran recorded as [rs, re] widens its step's span.
    let mut widen = |t: i64, rs: i64, re: i64| {
        let Some(m) = steps.marker_of(t) else {
            return;
        };
        let entry = span.entry(m).or_insert((rs, re));
        entry.0 = entry.0.min(rs);
        entry.1 = entry.1.max(re);
    };
    let (rk, rm) = (&recorded.kernels, &recorded.memops);
    for &(r, e, _) in assign {
        widen(ek.gpu_start_ns[e], rk.gpu_start_ns[r], rk.gpu_end_ns[r]);
    }
    for &(r, e) in memops {
        widen(
            engine.memops.gpu_start_ns[e],
            rm.gpu_start_ns[r],
            rm.gpu_end_ns[r],
        );
    }
    let mut spans: Vec<(usize, (i64, i64))> = span.into_iter().collect();
    spans.sort_by_key(|(m, _)| *m);
    for (m, (start, end)) in spans {
        let name = recorded.strings.intern(engine.strings.get(em.name[m]));
        recorded.markers.push(MarkerRow {
            name,
            source: MarkerSource::Engine as u8,
            phase: em.phase[m],
            device: stream.0,
            gpu_start_ns: start,
            gpu_end_ns: end,
            step: em.step[m],
            batch_size: em.batch_size[m],
            tokens: em.tokens[m],
            ..MarkerRow::default()
        });
        rep.steps += 1;
    }
}

/// Places each engine memop (recorded memop row, engine memop row) by the kernel join: its
/// recorded copy is the first untaken one of the same kind on the walked stream that starts
/// after the recorded kernel(s) of the engine launch just before it and before those of the
/// launch just after it. Copies the engine did not trace (a bench's own bookkeeping, the
/// per-step metadata upload) sit in the same gaps but later, or are of another kind.
fn join_memops(
    engine: &Trace,
    recorded: &Trace,
    stream: (u32, u32),
    assign: &[(usize, usize, bool)],
) -> Vec<(usize, usize)> {
    let em = &engine.memops;
    if em.len == 0 {
        return Vec::new();
    }
    // Engine kernel row -> the earliest and latest start of its recorded kernel(s).
    let rk = &recorded.kernels;
    let mut placed: HashMap<usize, (i64, i64)> = HashMap::new();
    for &(r, e, _) in assign {
        let t = rk.gpu_start_ns[r];
        let p = placed.entry(e).or_insert((t, t));
        p.0 = p.0.min(t);
        p.1 = p.1.max(t);
    }
    let ek = &engine.kernels;
    let mut by_corr: Vec<(u64, usize)> = (0..ek.len()).map(|i| (ek.correlation[i], i)).collect();
    by_corr.sort_unstable();
    let rm = &recorded.memops;
    let mut rows: Vec<usize> = (0..rm.len)
        .filter(|&i| (rm.device[i], rm.stream[i]) == stream)
        .collect();
    rows.sort_by_key(|&i| (rm.gpu_start_ns[i], rm.correlation[i]));
    let starts: Vec<i64> = rows.iter().map(|&i| rm.gpu_start_ns[i]).collect();
    let mut taken = vec![false; rows.len()];
    let mut out = Vec::new();
    for e in 0..em.len {
        let c = em.correlation[e];
        let at = by_corr.partition_point(|&(k, _)| k < c);
        // The launches around the copy, as recorded; the one before must have been joined.
        let Some(&(_, before)) = at.checked_sub(1).and_then(|i| by_corr.get(i)) else {
            continue;
        };
        let Some(&(_, lo)) = placed.get(&before) else {
            continue;
        };
        let hi = by_corr
            .get(at)
            .and_then(|&(_, after)| placed.get(&after))
            .map_or(i64::MAX, |&(first, _)| first);
        let from = starts.partition_point(|&t| t <= lo);
        let hit = (from..rows.len())
            .take_while(|&j| starts[j] < hi)
            .find(|&j| !taken[j] && rm.kind[rows[j]] == em.kind[e]);
        if let Some(j) = hit {
            taken[j] = true;
            out.push((rows[j], e));
        }
    }
    out
}
