//! Search over the timeline: a regular expression over the names of kernels and memops,
//! host scopes and markers. Every match is highlighted where it is drawn (a folded run that
//! holds one is drawn as a match), and next / previous walk the matches in time order, each
//! lane's matches found by binary search.

use gapscope_analyzer::explore::HostRow;
use gapscope_traces::StrId;
use regex::Regex;

use super::timeline::Hit;
use crate::loader::Loaded;

/// The matches: per GPU lane, per marker lane and row, per host lane and row, the sorted
/// indices of the matching items.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Found {
    pub gpu: Vec<Vec<u32>>,
    pub markers: Vec<Vec<Vec<u32>>>,
    pub host: Vec<Vec<Vec<u32>>>,
    pub total: usize,
}

/// The search box's state.
#[derive(Debug, Default)]
pub struct Search {
    pub text: String,
    /// The text the matches are for.
    pub searched: String,
    pub error: Option<String>,
    pub found: Option<Found>,
    /// The match last walked to: its start and what it is.
    pub at: Option<(i64, Hit)>,
}

/// A match to walk to: its window and what to select.
#[derive(Debug, Clone, PartialEq)]
pub struct Match {
    pub start_ns: i64,
    pub end_ns: i64,
    pub hit: Hit,
}

impl Search {
    /// Runs the search for the current text (nothing when it has not changed); an empty
    /// text clears it.
    pub fn run(&mut self, l: &Loaded) {
        if self.text == self.searched && (self.found.is_some() || self.error.is_some()) {
            return;
        }
        self.searched = self.text.clone();
        self.at = None;
        if self.text.is_empty() {
            self.found = None;
            self.error = None;
            return;
        }
        match Regex::new(&self.text) {
            Ok(re) => {
                self.found = Some(find(l, &re));
                self.error = None;
            }
            Err(e) => {
                self.found = None;
                self.error = Some(crate::loader::one_line(&e.to_string()));
            }
        }
    }

    /// Walks to the next match after the last one (or after `from_ns`), or the previous.
    pub fn step(&mut self, l: &Loaded, from_ns: i64, forward: bool) -> Option<Match> {
        let found = self.found.as_ref()?;
        let after = self.at.as_ref().map_or(from_ns, |(t, _)| *t);
        let m = walk(l, found, after, self.at.as_ref().map(|a| &a.1), forward)?;
        self.at = Some((m.start_ns, m.hit.clone()));
        Some(m)
    }
}

/// Every item whose name `re` matches.
pub fn find(l: &Loaded, re: &Regex) -> Found {
    let t = &l.x.trace;
    // Each name tested once.
    let mut memo: Vec<u8> = vec![2; t.strings.len()];
    let mut is = |id: StrId| -> bool {
        match memo.get(id as usize) {
            Some(0) => false,
            Some(1) => true,
            Some(_) => {
                let m = re.is_match(t.strings.get(id));
                memo[id as usize] = u8::from(m);
                m
            }
            None => false,
        }
    };
    let mut total = 0;
    let gpu: Vec<Vec<u32>> =
        l.x.lanes
            .gpu
            .iter()
            .map(|lane| {
                let v: Vec<u32> = (0..lane.len())
                    .filter(|&i| {
                        let a = lane.act[i];
                        let name = if a.is_memop() {
                            t.memops.name[a.index()]
                        } else {
                            t.kernels.name[a.index()]
                        };
                        is(name)
                    })
                    .map(|i| i as u32)
                    .collect();
                total += v.len();
                v
            })
            .collect();
    let mut rows = |rows: &[HostRow], name: &dyn Fn(u32) -> StrId| -> Vec<Vec<u32>> {
        rows.iter()
            .map(|r| {
                let v: Vec<u32> = (0..r.len())
                    .filter(|&i| is(name(r.id[i])))
                    .map(|i| i as u32)
                    .collect();
                total += v.len();
                v
            })
            .collect()
    };
    let forest = &l.x.forest;
    let host =
        l.x.lanes
            .host
            .iter()
            .map(|h| rows(&h.rows, &|id| forest.nodes[id as usize].name))
            .collect();
    let markers =
        l.x.lanes
            .markers
            .iter()
            .map(|m| rows(&m.rows, &|id| t.markers.name[id as usize]))
            .collect();
    Found {
        gpu,
        markers,
        host,
        total,
    }
}

/// The first match starting after `after` (before it, going back); of matches starting at
/// the same instant, the one after `last` in lane order.
fn walk(l: &Loaded, f: &Found, after: i64, last: Option<&Hit>, forward: bool) -> Option<Match> {
    let mut cands: Vec<Match> = Vec::new();
    let mut consider = |start: &[i64], end: &[i64], idx: &[u32], hit: &dyn Fn(usize) -> Hit| {
        // The first match at or after `after` (going forward), the last at or before it.
        let k = idx.partition_point(|&i| start[i as usize] < after);
        let range: Vec<usize> = if forward {
            idx[k..].iter().take(2).map(|&i| i as usize).collect()
        } else {
            let e = idx.partition_point(|&i| start[i as usize] <= after);
            idx[..e].iter().rev().take(2).map(|&i| i as usize).collect()
        };
        for i in range {
            cands.push(Match {
                start_ns: start[i],
                end_ns: end[i],
                hit: hit(i),
            });
        }
    };
    for (li, v) in f.gpu.iter().enumerate() {
        let lane = &l.x.lanes.gpu[li];
        consider(&lane.spans.start_ns, &lane.spans.end_ns, v, &|i| {
            Hit::Activity(lane.act[i])
        });
    }
    for (hi, rows) in f.host.iter().enumerate() {
        for (ri, v) in rows.iter().enumerate() {
            let r = &l.x.lanes.host[hi].rows[ri];
            consider(&r.spans.start_ns, &r.spans.end_ns, v, &|i| {
                Hit::Scope(r.id[i])
            });
        }
    }
    for (mi, rows) in f.markers.iter().enumerate() {
        for (ri, v) in rows.iter().enumerate() {
            let r = &l.x.lanes.markers[mi].rows[ri];
            consider(&r.spans.start_ns, &r.spans.end_ns, v, &|i| {
                Hit::Marker(r.id[i])
            });
        }
    }
    // Strictly after (before) `after`, or at it but not the last match itself.
    let ok = |m: &Match| {
        let moved = if forward {
            m.start_ns > after
        } else {
            m.start_ns < after
        };
        moved || (m.start_ns == after && last != Some(&m.hit))
    };
    let mut v: Vec<Match> = cands.into_iter().filter(ok).collect();
    v.sort_by_key(|m| m.start_ns);
    if forward {
        v.into_iter().next()
    } else {
        v.pop()
    }
}
