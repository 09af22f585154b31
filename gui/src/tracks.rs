//! The timeline's tracks and their layout, with no egui painting (tested headless): the
//! steps, each device's markers, each GPU lane, and the host threads grouped by process,
//! busiest process and thread first. A layout collapses, hides, pins, reorders and resizes
//! tracks; it names them by role and rank (the second-busiest thread of the busiest
//! process), not by pid and tid, so the layout of one trace fits the next of its kind and is
//! kept per kind of trace (`layout-KIND.txt`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// A track, named stably across traces of one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TrackKey {
    Steps,
    /// A device's markers.
    Markers(u32),
    /// A GPU lane: device and stream.
    Gpu(u32, u32),
    /// The processes of the host, busiest first.
    Process(usize),
    /// A host thread: its process's rank and its own among the process's threads.
    Thread(usize, usize),
}

impl fmt::Display for TrackKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrackKey::Steps => write!(f, "steps"),
            TrackKey::Markers(d) => write!(f, "markers:{d}"),
            TrackKey::Gpu(d, s) => write!(f, "gpu:{d}:{s}"),
            TrackKey::Process(p) => write!(f, "process:{p}"),
            TrackKey::Thread(p, t) => write!(f, "thread:{p}:{t}"),
        }
    }
}

impl TrackKey {
    pub fn parse(s: &str) -> Option<Self> {
        let mut it = s.split(':');
        let kind = it.next()?;
        let mut num = || it.next()?.parse::<u64>().ok();
        let k = match kind {
            "steps" => TrackKey::Steps,
            "markers" => TrackKey::Markers(u32::try_from(num()?).ok()?),
            "gpu" => TrackKey::Gpu(u32::try_from(num()?).ok()?, u32::try_from(num()?).ok()?),
            "process" => TrackKey::Process(num()? as usize),
            "thread" => TrackKey::Thread(num()? as usize, num()? as usize),
            _ => return None,
        };
        Some(k)
    }

    /// The track that holds this one (a thread's process).
    pub fn parent(self) -> Option<TrackKey> {
        match self {
            TrackKey::Thread(p, _) => Some(TrackKey::Process(p)),
            _ => None,
        }
    }
}

/// What a track draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrackBody {
    Steps,
    /// Index into the marker lanes.
    Markers(usize),
    /// Index into the GPU lanes.
    Gpu(usize),
    /// A process's header: its pid and its threads' count.
    Process {
        pid: u32,
        threads: usize,
    },
    /// Index into the host lanes.
    Thread(usize),
}

/// One track of a trace, in the natural order.
#[derive(Debug, Clone, PartialEq)]
pub struct Track {
    pub key: TrackKey,
    pub body: TrackBody,
    /// Rows of ranges it holds at full height (1 for steps, GPU lanes and headers).
    pub rows: usize,
}

impl Track {
    /// Whether it can collapse (a process, a thread with nested rows).
    pub fn collapsible(&self) -> bool {
        matches!(self.body, TrackBody::Process { .. }) || self.rows > 1
    }
}

/// The host threads' figures a layout needs: per host lane, its tid, pid, rows and busy
/// time (its outermost scopes' time).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThreadInfo {
    pub tid: u64,
    pub pid: u32,
    pub rows: usize,
    pub busy_ns: i64,
}

/// The tracks of a trace in their natural order: steps, markers per device, GPU lanes,
/// then each process (busiest first) followed by its threads (busiest first).
pub fn tracks(markers: &[(u32, usize)], gpu: &[(u32, u32)], threads: &[ThreadInfo]) -> Vec<Track> {
    let mut out = vec![Track {
        key: TrackKey::Steps,
        body: TrackBody::Steps,
        rows: 1,
    }];
    for (i, &(device, rows)) in markers.iter().enumerate() {
        out.push(Track {
            key: TrackKey::Markers(device),
            body: TrackBody::Markers(i),
            rows: rows.max(1),
        });
    }
    for (i, &(device, stream)) in gpu.iter().enumerate() {
        out.push(Track {
            key: TrackKey::Gpu(device, stream),
            body: TrackBody::Gpu(i),
            rows: 1,
        });
    }
    // Processes by busy time, then pid; threads likewise, then tid.
    let mut by_pid: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, t) in threads.iter().enumerate() {
        by_pid.entry(t.pid).or_default().push(i);
    }
    let mut procs: Vec<(u32, Vec<usize>, i64)> = by_pid
        .into_iter()
        .map(|(pid, mut v)| {
            v.sort_by_key(|&i| (std::cmp::Reverse(threads[i].busy_ns), threads[i].tid));
            let busy = v.iter().map(|&i| threads[i].busy_ns).sum();
            (pid, v, busy)
        })
        .collect();
    procs.sort_by_key(|p| (std::cmp::Reverse(p.2), p.0));
    for (p, (pid, v, _)) in procs.into_iter().enumerate() {
        out.push(Track {
            key: TrackKey::Process(p),
            body: TrackBody::Process {
                pid,
                threads: v.len(),
            },
            rows: 1,
        });
        for (t, i) in v.into_iter().enumerate() {
            out.push(Track {
                key: TrackKey::Thread(p, t),
                body: TrackBody::Thread(i),
                rows: threads[i].rows.max(1),
            });
        }
    }
    out
}

/// How one track is shown.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prefs {
    pub pinned: bool,
    pub hidden: bool,
    pub collapsed: bool,
    /// Height of one of its rows, px.
    pub row_h: f32,
}

/// Row heights a track may take, px.
pub const MIN_ROW_H: f32 = 8.0;
pub const MAX_ROW_H: f32 = 80.0;

impl Prefs {
    /// Steps, markers and GPU lanes pinned to the top; host tracks scroll.
    pub fn default_for(key: TrackKey) -> Self {
        let (pinned, row_h) = match key {
            TrackKey::Steps => (true, 16.0),
            TrackKey::Markers(_) => (true, 14.0),
            TrackKey::Gpu(..) => (true, 20.0),
            TrackKey::Process(_) => (false, 16.0),
            TrackKey::Thread(..) => (false, 14.0),
        };
        Self {
            pinned,
            hidden: false,
            collapsed: false,
            row_h,
        }
    }
}

/// The user's layout: preferences that differ from the defaults, and an order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Layout {
    prefs: BTreeMap<TrackKey, Prefs>,
    /// Tracks moved by the user, in the order asked; the others keep their natural place
    /// after them.
    order: Vec<TrackKey>,
}

/// A track as placed: which, how many rows, their height, and its top relative to its
/// region (the pinned area or the scrolled one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Placed {
    pub track: usize,
    pub rows: usize,
    pub row_h: f32,
    pub y: f32,
}

impl Placed {
    pub fn height(&self) -> f32 {
        self.rows as f32 * self.row_h
    }
}

/// Space under each track, px.
pub const GAP: f32 = 2.0;

impl Layout {
    pub fn prefs(&self, key: TrackKey) -> Prefs {
        self.prefs
            .get(&key)
            .copied()
            .unwrap_or_else(|| Prefs::default_for(key))
    }

    fn edit(&mut self, key: TrackKey, f: impl FnOnce(&mut Prefs)) {
        let mut p = self.prefs(key);
        f(&mut p);
        if p == Prefs::default_for(key) {
            self.prefs.remove(&key);
        } else {
            self.prefs.insert(key, p);
        }
    }

    pub fn toggle_collapsed(&mut self, key: TrackKey) {
        self.edit(key, |p| p.collapsed = !p.collapsed);
    }
    pub fn set_collapsed(&mut self, key: TrackKey, c: bool) {
        self.edit(key, |p| p.collapsed = c);
    }
    pub fn set_hidden(&mut self, key: TrackKey, h: bool) {
        self.edit(key, |p| p.hidden = h);
    }
    pub fn set_pinned(&mut self, key: TrackKey, pinned: bool) {
        self.edit(key, |p| p.pinned = pinned);
    }
    /// Sets a track's row height, kept within [`MIN_ROW_H`]..=[`MAX_ROW_H`].
    pub fn set_row_h(&mut self, key: TrackKey, h: f32) {
        self.edit(key, |p| p.row_h = h.clamp(MIN_ROW_H, MAX_ROW_H));
    }
    /// Shows every hidden track again.
    pub fn show_all(&mut self) {
        let keys: Vec<TrackKey> = self.prefs.keys().copied().collect();
        for k in keys {
            self.set_hidden(k, false);
        }
    }
    /// Collapses (or expands) every process group of `tracks`: one click for the host.
    pub fn collapse_host(&mut self, tracks: &[Track], collapsed: bool) {
        for t in tracks {
            if matches!(t.key, TrackKey::Process(_)) {
                self.set_collapsed(t.key, collapsed);
            }
        }
    }
    /// Whether every process group is collapsed (false when there is none).
    pub fn host_collapsed(&self, tracks: &[Track]) -> bool {
        let mut procs = tracks
            .iter()
            .filter(|t| matches!(t.key, TrackKey::Process(_)))
            .peekable();
        procs.peek().is_some() && procs.all(|t| self.prefs(t.key).collapsed)
    }
    pub fn hidden_count(&self) -> usize {
        self.prefs.values().filter(|p| p.hidden).count()
    }

    /// Moves `key` just before `target` among tracks of its level (threads among the
    /// threads of one process, the others among themselves); `tracks` gives the current
    /// order.
    pub fn move_before(&mut self, tracks: &[Track], key: TrackKey, target: TrackKey) {
        if key == target || key.parent() != target.parent() {
            return;
        }
        let mut now: Vec<TrackKey> = self
            .ordered(tracks)
            .into_iter()
            .map(|i| tracks[i].key)
            .filter(|k| k.parent() == key.parent())
            .collect();
        now.retain(|&k| k != key);
        let at = now.iter().position(|&k| k == target).unwrap_or(now.len());
        now.insert(at, key);
        self.order.retain(|k| k.parent() != key.parent());
        self.order.extend(now);
    }

    /// Moves `key` one place up (`-1`) or down (`1`) among its level.
    pub fn nudge(&mut self, tracks: &[Track], key: TrackKey, by: i32) {
        let level: Vec<TrackKey> = self
            .ordered(tracks)
            .into_iter()
            .map(|i| tracks[i].key)
            .filter(|k| k.parent() == key.parent())
            .collect();
        let Some(at) = level.iter().position(|&k| k == key) else {
            return;
        };
        if by < 0 && at > 0 {
            self.move_before(tracks, key, level[at - 1]);
        } else if by > 0 && at + 1 < level.len() {
            // Before the one after next, or last.
            match level.get(at + 2) {
                Some(&t) => self.move_before(tracks, key, t),
                None => {
                    let last = level[at + 1];
                    self.move_before(tracks, key, last);
                    self.move_before(tracks, last, key);
                }
            }
        }
    }

    /// Indices of `tracks` in display order: top-level tracks by the user's order then
    /// their natural place, each process followed by its threads in the same way.
    pub fn ordered(&self, tracks: &[Track]) -> Vec<usize> {
        let pos = |i: usize| -> (usize, usize) {
            match self.order.iter().position(|&k| k == tracks[i].key) {
                Some(p) => (0, p),
                None => (1, i),
            }
        };
        let mut top: Vec<usize> = (0..tracks.len())
            .filter(|&i| tracks[i].key.parent().is_none())
            .collect();
        top.sort_by_key(|&i| pos(i));
        let mut out = Vec::with_capacity(tracks.len());
        for i in top {
            out.push(i);
            let mut kids: Vec<usize> = (0..tracks.len())
                .filter(|&j| tracks[j].key.parent() == Some(tracks[i].key))
                .collect();
            kids.sort_by_key(|&j| pos(j));
            out.extend(kids);
        }
        out
    }

    /// The tracks as shown: (pinned, scrolled), each from its region's top. A thread is
    /// pinned with its process; hidden tracks and the threads of a collapsed process are
    /// left out; a collapsed thread shows its outermost row.
    pub fn place(&self, tracks: &[Track]) -> (Vec<Placed>, Vec<Placed>) {
        let (mut pinned, mut scrolled) = (Vec::new(), Vec::new());
        let (mut yp, mut ys) = (0.0, 0.0);
        for i in self.ordered(tracks) {
            let t = &tracks[i];
            let p = self.prefs(t.key);
            let parent = t.key.parent().map(|k| self.prefs(k));
            if p.hidden || parent.is_some_and(|q| q.hidden || q.collapsed) {
                continue;
            }
            let rows = if p.collapsed { 1 } else { t.rows };
            let pin = parent.map_or(p.pinned, |q| q.pinned);
            let (list, y) = if pin {
                (&mut pinned, &mut yp)
            } else {
                (&mut scrolled, &mut ys)
            };
            list.push(Placed {
                track: i,
                rows,
                row_h: p.row_h,
                y: *y,
            });
            *y += rows as f32 * p.row_h + GAP;
        }
        (pinned, scrolled)
    }

    /// The layout as text, a line per changed track (`KEY pinned hidden collapsed row_h`)
    /// and the order.
    pub fn to_text(&self) -> String {
        let mut s = String::from("# gapscope-gui timeline layout\n");
        for (k, p) in &self.prefs {
            s += &format!(
                "{k} {} {} {} {}\n",
                u8::from(p.pinned),
                u8::from(p.hidden),
                u8::from(p.collapsed),
                p.row_h
            );
        }
        if !self.order.is_empty() {
            let keys: Vec<String> = self.order.iter().map(|k| k.to_string()).collect();
            s += &format!("order {}\n", keys.join(" "));
        }
        s
    }

    /// Reads [`Self::to_text`]; lines it does not understand are skipped.
    pub fn from_text(text: &str) -> Self {
        let mut l = Layout::default();
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            match f.as_slice() {
                ["order", keys @ ..] => {
                    l.order = keys.iter().filter_map(|k| TrackKey::parse(k)).collect();
                }
                [key, pinned, hidden, collapsed, h] => {
                    let (Some(k), Ok(h)) = (TrackKey::parse(key), h.parse::<f32>()) else {
                        continue;
                    };
                    let flag = |s: &str| s == "1";
                    let p = Prefs {
                        pinned: flag(pinned),
                        hidden: flag(hidden),
                        collapsed: flag(collapsed),
                        row_h: if h.is_finite() {
                            h.clamp(MIN_ROW_H, MAX_ROW_H)
                        } else {
                            Prefs::default_for(k).row_h
                        },
                    };
                    l.prefs.insert(k, p);
                }
                _ => {}
            }
        }
        l
    }
}

/// Where the layout of one kind of trace is kept.
pub fn layout_file(dir: &Path, kind: &str) -> PathBuf {
    let safe: String = kind
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    dir.join(format!("layout-{safe}.txt"))
}

/// The layout kept for `kind`, or the default.
pub fn load(dir: &Path, kind: &str) -> Layout {
    std::fs::read_to_string(layout_file(dir, kind))
        .map(|t| Layout::from_text(&t))
        .unwrap_or_default()
}

/// Keeps the layout of `kind`; an error as one line.
pub fn save(dir: &Path, kind: &str, l: &Layout) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    gapscope_traces::write_output(&layout_file(dir, kind), &[], l.to_text().as_bytes())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A with_stack trace: one GPU lane, a main thread with 55 rows of Python stack in a
    /// process, and a second, idler process.
    fn stack_trace() -> Vec<Track> {
        let threads = [
            ThreadInfo {
                tid: 7,
                pid: 2,
                rows: 3,
                busy_ns: 10,
            },
            ThreadInfo {
                tid: 5,
                pid: 1,
                rows: 55,
                busy_ns: 1000,
            },
            ThreadInfo {
                tid: 6,
                pid: 1,
                rows: 2,
                busy_ns: 5,
            },
        ];
        tracks(&[(0, 1)], &[(0, 7)], &threads)
    }

    #[test]
    fn host_threads_group_by_process_busiest_first() {
        let t = stack_trace();
        let keys: Vec<TrackKey> = t.iter().map(|t| t.key).collect();
        assert_eq!(
            keys,
            [
                TrackKey::Steps,
                TrackKey::Markers(0),
                TrackKey::Gpu(0, 7),
                TrackKey::Process(0),
                TrackKey::Thread(0, 0),
                TrackKey::Thread(0, 1),
                TrackKey::Process(1),
                TrackKey::Thread(1, 0),
            ]
        );
        assert_eq!(t[3].body, TrackBody::Process { pid: 1, threads: 2 });
        assert_eq!(t[4].body, TrackBody::Thread(1));
    }

    #[test]
    fn steps_and_gpu_lanes_stay_above_the_fold_and_the_host_collapses_in_one_go() {
        let t = stack_trace();
        let mut l = Layout::default();
        let (pinned, scrolled) = l.place(&t);
        let keys = |v: &[Placed]| v.iter().map(|p| t[p.track].key).collect::<Vec<_>>();
        // Pinned first, whatever the 55 rows of Python stack below them.
        assert_eq!(
            keys(&pinned),
            [TrackKey::Steps, TrackKey::Markers(0), TrackKey::Gpu(0, 7)]
        );
        assert!(pinned.iter().map(Placed::height).sum::<f32>() < 80.0);
        assert_eq!(scrolled.len(), 5);
        l.collapse_host(&t, true);
        assert!(l.host_collapsed(&t));
        let (_, scrolled) = l.place(&t);
        assert_eq!(
            keys(&scrolled),
            [TrackKey::Process(0), TrackKey::Process(1)]
        );
        // Hide, pin, resize, collapse one thread.
        l.collapse_host(&t, false);
        l.set_hidden(TrackKey::Markers(0), true);
        l.set_pinned(TrackKey::Process(1), true);
        l.set_row_h(TrackKey::Gpu(0, 7), 200.0);
        l.toggle_collapsed(TrackKey::Thread(0, 0));
        let (pinned, scrolled) = l.place(&t);
        assert_eq!(
            keys(&pinned),
            [
                TrackKey::Steps,
                TrackKey::Gpu(0, 7),
                TrackKey::Process(1),
                TrackKey::Thread(1, 0)
            ]
        );
        assert_eq!(pinned[1].row_h, MAX_ROW_H);
        assert_eq!(scrolled[1].rows, 1, "a collapsed thread keeps one row");
        assert_eq!(l.hidden_count(), 1);
    }

    #[test]
    fn tracks_reorder_within_their_level_and_the_layout_round_trips() {
        let t = stack_trace();
        let mut l = Layout::default();
        l.move_before(&t, TrackKey::Gpu(0, 7), TrackKey::Steps);
        l.move_before(&t, TrackKey::Thread(0, 1), TrackKey::Thread(0, 0));
        // A thread cannot leave its process.
        l.move_before(&t, TrackKey::Thread(1, 0), TrackKey::Steps);
        let order: Vec<TrackKey> = l.ordered(&t).into_iter().map(|i| t[i].key).collect();
        assert_eq!(
            &order[..6],
            [
                TrackKey::Gpu(0, 7),
                TrackKey::Steps,
                TrackKey::Markers(0),
                TrackKey::Process(0),
                TrackKey::Thread(0, 1),
                TrackKey::Thread(0, 0),
            ]
        );
        l.nudge(&t, TrackKey::Process(0), 1);
        l.set_collapsed(TrackKey::Process(1), true);
        l.set_row_h(TrackKey::Thread(0, 0), 22.0);
        let back = Layout::from_text(&l.to_text());
        assert_eq!(back, l);
        assert_eq!(back.ordered(&t), l.ordered(&t));
        let d = tempfile::tempdir().unwrap();
        save(d.path(), "kineto json/stack", &l).unwrap();
        assert_eq!(load(d.path(), "kineto json/stack"), l);
        assert_eq!(load(d.path(), "native"), Layout::default());
    }
}
