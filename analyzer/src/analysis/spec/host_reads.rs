//! Forwards of a trace that names none (no module scopes, no markers: llama.cpp recorded with
//! CUPTI). An engine reads each forward's logits back before it samples, so each stream's
//! kernel sequence cut at its device-to-host copies falls into forwards (llama.cpp runs each
//! model's context on a stream of its own). When their kernel
//! counts form two clusters whose members alternate, the shallower is a draft and the deeper
//! its target; otherwise nothing is returned and the steps are found as before.

use std::collections::HashMap;

use gapscope_traces::{MemopKind, StrId, Trace};

use super::forwards::{Forward, ModelKey};

/// Smallest ratio between the two clusters' kernel counts: a draft of at most two thirds of
/// the target's depth (a draft as deep as its target would gain nothing).
const MIN_DEPTH_RATIO: f64 = 1.5;

/// Kernel names read per forward for its rows (the first GEMVs tell).
const NAMES_PER_FORWARD: usize = 64;

/// The forwards between device-to-host copies on `device`, each keyed by its cluster's
/// median kernel count; empty unless two clusters of at least two forwards each are found.
pub fn find(trace: &Trace, device: u32) -> Vec<Forward> {
    let (segments, names) = segments(trace, device);
    let mut segments = segments;
    let mut rows_of: HashMap<StrId, Option<i64>> = HashMap::new();
    for (fw, names) in segments.iter_mut().zip(&names) {
        fw.rows = names
            .iter()
            .filter_map(|&n| {
                *rows_of
                    .entry(n)
                    .or_insert_with(|| gemv_columns(trace.strings.get(n)))
            })
            .max();
    }
    let kept: Vec<usize> = (0..segments.len())
        .filter(|&i| segments[i].has_kernels())
        .collect();
    let counts: Vec<u32> = kept.iter().map(|&i| segments[i].kernels).collect();
    let Some(d) = two_depths(&counts) else {
        return Vec::new();
    };
    // A draft runs the target's kind of kernels; a sampler or any other short piece between
    // two reads does not.
    let (shallow, deep): (Vec<usize>, Vec<usize>) = kept
        .iter()
        .partition(|&&i| segments[i].kernels < d.threshold);
    let base = |ids: &[usize]| -> HashMap<&str, u32> {
        let mut m = HashMap::new();
        for &i in ids {
            for &n in &names[i] {
                *m.entry(base_name(trace.strings.get(n))).or_default() += 1;
            }
        }
        m
    };
    let (shallow_names, deep_names) = (base(&shallow), base(&deep));
    let total: u32 = shallow_names.values().sum();
    let shared: u32 = shallow_names
        .iter()
        .filter(|(n, _)| deep_names.contains_key(*n))
        .map(|(_, c)| c)
        .sum();
    if f64::from(shared) < MIN_SHARED_KERNELS * f64::from(total) {
        return Vec::new();
    }
    let mut forwards: Vec<Forward> = Vec::with_capacity(kept.len());
    for i in kept {
        let mut f = segments[i].clone();
        f.instance = ModelKey::Depth(if f.kernels < d.threshold {
            d.shallow
        } else {
            d.deep
        });
        f.host_start_ns = f.gpu_start_ns;
        f.host_end_ns = f.gpu_end_ns;
        forwards.push(f);
    }
    forwards.sort_by_key(|f| f.gpu_start_ns);
    forwards
}

/// Share of a draft's kernels (by base name) that the target runs too.
const MIN_SHARED_KERNELS: f64 = 0.9;

/// A kernel's name without template arguments or parameters (`mul_mat_vec_q`).
fn base_name(name: &str) -> &str {
    let name = name.strip_prefix("void ").unwrap_or(name);
    let end = name.find(['<', '(']).unwrap_or(name.len());
    &name[..end]
}

/// One piece of a stream's kernel sequence: its kernels' indices in start order.
struct Piece {
    stream: u32,
    kernels: Vec<u32>,
}

/// Each stream's kernels (an engine runs each model's context on its own stream) cut at that
/// stream's device-to-host copies, then split where a whole piece of another stream runs in a
/// gap between two of its kernels (a forward whose logits nobody read, such as a prompt
/// without outputs, followed after the other model's forwards by the next one). The
/// forwards, and up to `NAMES_PER_FORWARD` kernel names of each.
fn segments(trace: &Trace, device: u32) -> (Vec<Forward>, Vec<Vec<StrId>>) {
    let (k, m) = (&trace.kernels, &trace.memops);
    let mut cuts: HashMap<u32, Vec<i64>> = HashMap::new();
    for i in 0..m.len() {
        if m.device[i] == device && m.kind[i] == MemopKind::DtoH as u8 {
            cuts.entry(m.stream[i]).or_default().push(m.gpu_start_ns[i]);
        }
    }
    if cuts.values().map(Vec::len).sum::<usize>() < 2 {
        return (Vec::new(), Vec::new());
    }
    for c in cuts.values_mut() {
        c.sort_unstable();
    }
    let mut order: Vec<u32> = (0..k.len() as u32)
        .filter(|&i| k.device[i as usize] == device)
        .collect();
    order.sort_by_key(|&i| (k.stream[i as usize], k.gpu_start_ns[i as usize]));
    let mut pieces: Vec<Piece> = Vec::new();
    let mut at: HashMap<(u32, usize), usize> = HashMap::new();
    for &i in &order {
        let (stream, start) = (k.stream[i as usize], k.gpu_start_ns[i as usize]);
        let cut = cuts
            .get(&stream)
            .map_or(0, |c| c.partition_point(|&t| t <= start));
        let p = *at.entry((stream, cut)).or_insert_with(|| {
            pieces.push(Piece {
                stream,
                kernels: Vec::new(),
            });
            pieces.len() - 1
        });
        pieces[p].kernels.push(i);
    }
    let span = |p: &Piece| {
        let s = p.kernels.iter().map(|&i| k.gpu_start_ns[i as usize]).min();
        let e = p.kernels.iter().map(|&i| k.gpu_end_ns[i as usize]).max();
        (s.unwrap_or(0), e.unwrap_or(0))
    };
    // Other streams' pieces by start, to find the ones inside a gap.
    let mut spans: Vec<(i64, i64, u32)> = pieces
        .iter()
        .map(|p| {
            let (s, e) = span(p);
            (s, e, p.stream)
        })
        .collect();
    spans.sort_unstable();
    let inside = |stream: u32, from: i64, to: i64| {
        let first = spans.partition_point(|&(s, _, _)| s < from);
        spans[first..]
            .iter()
            .take_while(|&&(s, _, _)| s < to)
            .any(|&(_, e, st)| st != stream && e <= to)
    };
    let mut forwards = Vec::new();
    let mut names = Vec::new();
    for p in &pieces {
        let mut fw = empty();
        let mut nm = Vec::new();
        let mut end = i64::MIN;
        for &i in &p.kernels {
            let i = i as usize;
            let (start, stop) = (k.gpu_start_ns[i], k.gpu_end_ns[i]);
            if fw.has_kernels() && start > end && inside(p.stream, end, start) {
                forwards.push(std::mem::replace(&mut fw, empty()));
                names.push(std::mem::take(&mut nm));
            }
            fw.gpu_start_ns = fw.gpu_start_ns.min(start);
            fw.gpu_end_ns = fw.gpu_end_ns.max(stop);
            fw.kernels += 1;
            fw.busy_ns += (stop - start).max(0);
            fw.kernel_ids.push(i as u32);
            end = end.max(stop);
            if nm.len() < NAMES_PER_FORWARD {
                nm.push(k.name[i]);
            }
        }
        if fw.has_kernels() {
            forwards.push(fw);
            names.push(nm);
        }
    }
    (forwards, names)
}

fn empty() -> Forward {
    Forward::new(ModelKey::Depth(0))
}

/// Two clusters of kernel counts.
#[derive(Debug, PartialEq, Eq)]
struct Depths {
    /// Median count of each cluster.
    shallow: u32,
    deep: u32,
    /// The deep cluster's smallest count.
    threshold: u32,
}

/// The largest ratio between consecutive sorted kernel counts splits them into two clusters,
/// when it is at least `MIN_DEPTH_RATIO` and each side holds two forwards or more.
fn two_depths(counts: &[u32]) -> Option<Depths> {
    let mut counts = counts.to_vec();
    if counts.len() < 4 {
        return None;
    }
    counts.sort_unstable();
    let (split, ratio) = (2..=counts.len() - 2)
        .map(|i| (i, f64::from(counts[i]) / f64::from(counts[i - 1].max(1))))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    if ratio < MIN_DEPTH_RATIO {
        return None;
    }
    let (low, high) = counts.split_at(split);
    Some(Depths {
        shallow: low[low.len() / 2],
        deep: high[high.len() / 2],
        threshold: high[0],
    })
}

/// The columns (tokens) of a llama.cpp GEMV from its template arguments:
/// `mul_mat_vec_q<type, ncols_dst, …>` and `mul_mat_vec_f<T, acc, ncols_dst, …>`.
pub fn gemv_columns(name: &str) -> Option<i64> {
    let name = name.strip_prefix("void ").unwrap_or(name);
    let (at, rest) = if let Some(r) = name.strip_prefix("mul_mat_vec_q<") {
        (1, r)
    } else if let Some(r) = name.strip_prefix("mul_mat_vec_f<") {
        (2, r)
    } else {
        return None;
    };
    let args = &rest[..rest.find('>')?];
    let n: i64 = args.split(',').nth(at)?.trim().parse().ok()?;
    (1..=4096).contains(&n).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemv_columns_from_llamacpp_names() {
        assert_eq!(
            gemv_columns(
                "void mul_mat_vec_q<(ggml_type)8, 5, true, false, false>(void const*, void const*)"
            ),
            Some(5)
        );
        assert_eq!(
            gemv_columns("void mul_mat_vec_f<__nv_bfloat16, float, 1, 128, false, false>(x)"),
            Some(1)
        );
        for other in [
            "void mul_mat_vec_q<(ggml_type)8>(x)",
            "void mul_mat_vec_q<(ggml_type)8, -3, true>(x)",
            "void mul_mat_vec_q<(ggml_type)8, 5",
            "gemv_bf16_b1",
            "",
        ] {
            assert_eq!(gemv_columns(other), None, "{other}");
        }
    }

    #[test]
    fn two_depths_need_a_gap_and_two_of_each() {
        assert_eq!(
            two_depths(&[55, 58, 55, 210, 55, 55, 60, 210, 400]),
            Some(Depths {
                shallow: 55,
                deep: 210,
                threshold: 210
            })
        );
        // One depth (a plain run, or steps split by extra reads of similar size).
        assert_eq!(two_depths(&[200, 205, 210, 200, 198]), None);
        // A single deep outlier (a prefill) is not a second model.
        assert_eq!(two_depths(&[55, 55, 56, 55, 400]), None);
        assert_eq!(
            base_name("void mul_mat_vec_q<(ggml_type)8, 5>(int)"),
            "mul_mat_vec_q"
        );
        assert_eq!(base_name("k_argmax(float*)"), "k_argmax");
    }
}
