//! One kernel identity across sources. Every importer's kernel and memop names are
//! canonicalised here, once, after the import (see [`canonicalise`]), so that the same kernel
//! has the same name whether it came from torch.profiler (Kineto), nsys or a gapscope
//! recording, and `diff` pairs it.
//!
//! The canonical form is the spelling of the GNU demangler (libiberty / `__cxa_demangle`,
//! what Kineto and `c++filt` show), with single spaces:
//!
//! - a mangled name (`_Z...`) is demangled (cpp_demangle); one that does not demangle is kept;
//! - runs of whitespace become one space, and the ends are trimmed;
//! - integer template literals are written with their suffix, not a cast:
//!   `(unsigned long)3` becomes `3ul`, `(unsigned int)2` becomes `2u`, `(long)-1` becomes `-1l`,
//!   `(int)4` becomes `4` (cpp_demangle writes the cast, libiberty the suffix);
//! - the return type of a function template named *inside* a name (a lambda's enclosing
//!   function, a function used as a template argument) is dropped:
//!   `elementwise_kernel<128, 4, void at::native::gpu_kernel_impl_nocast<...>(...)::{lambda(int)#1}>`
//!   becomes `elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<...>(...)::{lambda(int)#1}>`.
//!   The return type of the whole name (`void at::native::elementwise_kernel<...>(...)`) stays;
//! - a reference to a const lambda that cpp_demangle prints as `{lambda(T const)#1}&` is
//!   written `{lambda(T)#1} const&`;
//! - `{anonymous}` (older demanglers) becomes `(anonymous namespace)`, and `>>` closing two
//!   template argument lists becomes `> >`.
//!
//! Memops are named from their kind: `Memcpy HtoD`, `Memcpy DtoH`, `Memcpy DtoD`,
//! `Memcpy HtoH`, `Memcpy PtoP`, `Memset` (Kineto's `Memcpy DtoD (Device -> Device)` and
//! `Memset (Device)` included); a memop of unknown kind keeps its name, whitespace normalised.
//!
//! The raw names stay in the trace: the string table only grows, and
//! `manifest.raw_names` maps each canonical name that differs from its source spelling to
//! that spelling (the first one seen), within [`RAW_NAMES_BUDGET`] bytes.

use std::borrow::Cow;
use std::sync::LazyLock;

use gapscope_traces::{MemopKind, StrId, Trace};
use regex::{Captures, Regex};

/// A host scope's name without the object addresses Python prints in it
/// (`<built-in method copy_ of Tensor object at 0x7f48a1b2c3d0>` becomes
/// `<built-in method copy_ of Tensor object>`): the address differs per object, so the same
/// method would count as a new scope for every tensor it ran on.
pub fn without_addresses(name: &str) -> Cow<'_, str> {
    static ADDRESS: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r" at 0x[0-9a-fA-F]+").expect("a valid pattern"));
    ADDRESS.replace_all(name, "")
}

/// Bytes of raw names the manifest keeps at most (the native reader refuses manifests over
/// 16 MiB); names past it are counted in a note.
pub const RAW_NAMES_BUDGET: usize = 4 << 20;

/// `(unsigned long)3` and friends: an integer literal written as a cast.
static LITERAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\((unsigned long long|long long|unsigned long|unsigned int|unsigned short|long|int|bool)\)(-?\d+)")
        .expect("literal regex")
});

/// A builtin return type at the start of a template or function argument, before a
/// qualified function name that a template argument list or parameter list follows.
static NESTED_RETURN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"([<(,] ?)((?:unsigned |signed )?(?:long long|long|int|short|char)|unsigned|void|bool|float|double|wchar_t|char8_t|char16_t|char32_t|__int128) ([A-Za-z_][A-Za-z0-9_:]*)([<(])",
    )
    .expect("nested return regex")
});

/// cpp_demangle's `{lambda(T const, ...)#N}&` for a reference to a const closure.
static CONST_LAMBDA: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\{lambda\(([^(){}]*?) const((?:, [^(){}]*)?)\)#(\d+)\}([&*])")
        .expect("const lambda regex")
});

/// Words that continue a builtin type rather than start a name.
const TYPE_WORDS: &[&str] = &[
    "const", "volatile", "long", "int", "short", "char", "unsigned", "signed", "double", "float",
];

/// Demangles `name` when it is mangled (`_Z...`); other names, and names that do not
/// demangle, come back unchanged. Not normalised: see [`canonical_kernel_name`].
pub fn demangle(name: &str) -> Cow<'_, str> {
    if !name.starts_with("_Z") {
        return Cow::Borrowed(name);
    }
    match cpp_demangle::Symbol::new(name.as_bytes())
        .ok()
        .and_then(|s| s.demangle().ok())
    {
        Some(d) => Cow::Owned(d),
        None => Cow::Borrowed(name),
    }
}

/// Normalises a demangled name to the canonical spelling described in the module docs.
/// Idempotent; a name already canonical comes back borrowed.
pub fn normalise_demangled(name: &str) -> Cow<'_, str> {
    let mut s: Cow<'_, str> = Cow::Borrowed(name);
    if s.contains(|c: char| c.is_whitespace() && c != ' ')
        || s.contains("  ")
        || s.starts_with(' ')
        || s.ends_with(' ')
    {
        s = Cow::Owned(s.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    if s.contains("{anonymous}") {
        s = Cow::Owned(s.replace("{anonymous}", "(anonymous namespace)"));
    }
    if s.contains(">>") {
        s = Cow::Owned(close_templates(&s));
    }
    if s.contains(')') {
        if let Cow::Owned(o) = LITERAL.replace_all(&s, literal) {
            s = Cow::Owned(o);
        }
        // Repeat: a dropped return type can uncover another one (`<void f<bool g<...`).
        for _ in 0..8 {
            match NESTED_RETURN.replace_all(&s, nested_return) {
                Cow::Owned(o) if o != *s => s = Cow::Owned(o),
                _ => break,
            }
        }
        if s.contains("{lambda(")
            && let Cow::Owned(o) = CONST_LAMBDA.replace_all(&s, "{lambda($1$2)#$3} const$4")
        {
            s = Cow::Owned(o);
        }
    }
    s
}

/// The canonical name of a kernel: demangled, then normalised.
pub fn canonical_kernel_name(raw: &str) -> Cow<'_, str> {
    match demangle(raw) {
        Cow::Borrowed(b) => normalise_demangled(b),
        Cow::Owned(o) => Cow::Owned(normalise_demangled(&o).into_owned()),
    }
}

/// The canonical name of a memop, from its kind.
pub fn canonical_memop_name(kind: MemopKind, raw: &str) -> Cow<'_, str> {
    let named = match kind {
        MemopKind::HtoD => "Memcpy HtoD",
        MemopKind::DtoH => "Memcpy DtoH",
        MemopKind::DtoD => "Memcpy DtoD",
        MemopKind::HtoH => "Memcpy HtoH",
        MemopKind::PtoP => "Memcpy PtoP",
        MemopKind::Memset => "Memset",
        MemopKind::Unknown => return normalise_demangled(raw),
    };
    Cow::Borrowed(named)
}

fn literal(c: &Captures<'_>) -> String {
    let n = &c[2];
    match &c[1] {
        "bool" if n == "0" => "false".to_owned(),
        "bool" if n == "1" => "true".to_owned(),
        "bool" => c[0].to_owned(),
        "unsigned long long" => format!("{n}ull"),
        "long long" => format!("{n}ll"),
        "unsigned long" => format!("{n}ul"),
        "unsigned int" => format!("{n}u"),
        "long" => format!("{n}l"),
        "int" => n.to_owned(),
        // libiberty keeps the cast for the other integer types.
        _ => c[0].to_owned(),
    }
}

fn nested_return(c: &Captures<'_>) -> String {
    let name = &c[3];
    if TYPE_WORDS.contains(&name) {
        return c[0].to_owned();
    }
    format!("{}{}{}", &c[1], name, &c[4])
}

/// `>>` closing two template argument lists becomes `> >`; `operator>>` stays.
fn close_templates(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut rest = s;
    while let Some(i) = rest.find(">>") {
        out.push_str(&rest[..i]);
        if out.ends_with("operator") || out.ends_with("operator>") {
            out.push('>');
            rest = &rest[i + 1..];
        } else {
            out.push_str("> ");
            rest = &rest[i + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// What [`canonicalise`] changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Canonicalised {
    /// Distinct kernel and memop names whose spelling changed.
    pub renamed: usize,
    /// Raw names left out of `manifest.raw_names` for want of budget.
    pub raw_names_dropped: usize,
}

/// Rewrites every kernel and memop name of `trace` to its canonical form, keeping each raw
/// spelling that differs in `manifest.raw_names`. Runs once per distinct name.
pub fn canonicalise(trace: &mut Trace) -> Canonicalised {
    let mut out = Canonicalised::default();
    let mut budget = RAW_NAMES_BUDGET.saturating_sub(
        trace
            .manifest
            .raw_names
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum(),
    );
    // Per source name id: its canonical id, once computed.
    let mut kernel_map: Vec<Option<StrId>> = vec![None; trace.strings.len()];
    let mut renamed = |trace: &mut Trace, id: StrId, canon: Cow<'_, str>| -> StrId {
        let canon = canon.into_owned();
        let raw = trace.strings.get(id).to_owned();
        let new = trace.strings.intern(&canon);
        out.renamed += 1;
        let cost = canon.len() + raw.len();
        if let std::collections::btree_map::Entry::Vacant(e) = trace.manifest.raw_names.entry(canon)
        {
            if cost <= budget {
                budget -= cost;
                e.insert(raw);
            } else {
                out.raw_names_dropped += 1;
            }
        }
        new
    };
    for i in 0..trace.kernels.name.len() {
        let id = trace.kernels.name[i];
        let Some(slot) = kernel_map.get(id as usize).copied() else {
            continue;
        };
        let new = match slot {
            Some(n) => n,
            None => {
                let raw = trace.strings.get(id);
                let n = match canonical_kernel_name(raw) {
                    Cow::Borrowed(b) if b == raw => id,
                    c => {
                        let c = Cow::Owned(c.into_owned());
                        renamed(trace, id, c)
                    }
                };
                kernel_map[id as usize] = Some(n);
                n
            }
        };
        trace.kernels.name[i] = new;
    }
    // Memops: keyed by (kind, name id); few distinct pairs.
    let mut memop_map: std::collections::HashMap<(u8, StrId), StrId> = Default::default();
    let rows = trace.memops.name.len().min(trace.memops.kind.len());
    for i in 0..rows {
        let (id, kind) = (trace.memops.name[i], trace.memops.kind[i]);
        let new = match memop_map.get(&(kind, id)) {
            Some(&n) => n,
            None => {
                let raw = trace.strings.get(id);
                let n = match canonical_memop_name(MemopKind::from_code(kind), raw) {
                    c if c == raw => id,
                    c => {
                        let c = Cow::Owned(c.into_owned());
                        renamed(trace, id, c)
                    }
                };
                memop_map.insert((kind, id), n);
                n
            }
        };
        trace.memops.name[i] = new;
    }
    if out.raw_names_dropped > 0 {
        trace.manifest.notes.push(format!(
            "{} raw kernel names not kept (over {} MiB of raw names)",
            out.raw_names_dropped,
            RAW_NAMES_BUDGET >> 20
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gapscope_traces::{KernelRow, Manifest, MemopRow};

    /// Real pairs: the same kernel as torch.profiler named it (tab) as gapscope-record named
    /// it, from traces/reference/hf-qwen3next-small-npl1.json.gz and
    /// traces/reference/cupti-qwen3next-small-npl1-late.gst (one profiled run).
    const PAIRS: &str = include_str!("names_pairs.tsv");

    #[test]
    fn real_pairs_from_one_run_get_one_name() {
        let mut n = 0;
        for line in PAIRS.lines() {
            let (kineto, record) = line.split_once('\t').expect("tab");
            assert_ne!(kineto, record);
            let (a, b) = (canonical_kernel_name(kineto), canonical_kernel_name(record));
            assert_eq!(a, b, "\n{kineto}\n{record}");
            assert!(a.starts_with("void "), "{a}");
            // Canonical names are fixed points.
            assert_eq!(canonical_kernel_name(&a), a);
            n += 1;
        }
        assert!(n >= 8, "{n} pairs");
    }

    #[test]
    fn kineto_spelling_is_the_canonical_one() {
        for line in PAIRS.lines() {
            let (kineto, _) = line.split_once('\t').expect("tab");
            if !kineto.starts_with("_Z") {
                assert_eq!(canonical_kernel_name(kineto), kineto);
                assert!(matches!(canonical_kernel_name(kineto), Cow::Borrowed(_)));
            }
        }
    }

    #[test]
    fn each_rule_on_its_own() {
        let c = |s: &str| canonical_kernel_name(s).into_owned();
        assert_eq!(
            c(
                "void k<at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, (unsigned long)2> >(int)"
            ),
            "void k<at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul> >(int)"
        );
        assert_eq!(
            c("void k<OpaqueType<(unsigned int)2>, (long)-1, (int)4, (bool)1>()"),
            "void k<OpaqueType<2u>, -1l, 4, true>()"
        );
        assert_eq!(
            c(
                "void e<128, 2, void at::native::gpu_kernel_impl_nocast<F>(at::TensorIteratorBase&, F const&)::{lambda(int)#1}>(int)"
            ),
            "void e<128, 2, at::native::gpu_kernel_impl_nocast<F>(at::TensorIteratorBase&, F const&)::{lambda(int)#1}>(int)"
        );
        assert_eq!(
            c(
                "void h<int, bool at::cuda::hist<int>(at::Tensor)::{lambda(int)#1}>(unsigned int, long long, char const*)"
            ),
            "void h<int, at::cuda::hist<int>(at::Tensor)::{lambda(int)#1}>(unsigned int, long long, char const*)"
        );
        assert_eq!(
            c(
                "void e<g<{lambda(c10::BFloat16 const, bool)#1}>(X&, {lambda(c10::BFloat16 const, bool)#1}&)::{lambda(int)#1}>()"
            ),
            "void e<g<{lambda(c10::BFloat16 const, bool)#1}>(X&, {lambda(c10::BFloat16, bool)#1} const&)::{lambda(int)#1}>()"
        );
        assert_eq!(
            c("  void {anonymous}::k<A<int>>(\tint)  "),
            "void (anonymous namespace)::k<A<int> >( int)"
        );
        assert_eq!(c("S::operator>>(int)"), "S::operator>>(int)");
        assert_eq!(c("_Z5scalePfif"), "scale(float*, int, float)");
        assert_eq!(c("_Znot a symbol"), "_Znot a symbol");
        assert_eq!(
            c("nvjet_sm90_tst_64x8_64x16_2x1_v_bz_TNT"),
            "nvjet_sm90_tst_64x8_64x16_2x1_v_bz_TNT"
        );
        // Builtin types that are not return types stay.
        let keep = "void k<unsigned int, long long, signed char, float (*)(int)>(unsigned long, char const*)";
        assert_eq!(c(keep), keep);
    }

    #[test]
    fn memops_are_named_from_their_kind() {
        for (kind, raw, want) in [
            (
                MemopKind::DtoD,
                "Memcpy DtoD (Device -> Device)",
                "Memcpy DtoD",
            ),
            (MemopKind::DtoD, "Memcpy DtoD", "Memcpy DtoD"),
            (
                MemopKind::HtoD,
                "Memcpy HtoD (Pageable -> Device)",
                "Memcpy HtoD",
            ),
            (MemopKind::Memset, "Memset (Device)", "Memset"),
            (MemopKind::Memset, "Memset", "Memset"),
            (MemopKind::Unknown, "Memcpy  odd", "Memcpy odd"),
        ] {
            assert_eq!(canonical_memop_name(kind, raw), want, "{raw:?}");
        }
    }

    #[test]
    fn canonicalise_rewrites_rows_and_keeps_raw_names() {
        let mut t = Trace::new(Manifest::new("test"));
        let mangled = t.strings.intern("_Z5scalePfif");
        let plain = t.strings.intern("nvjet_x");
        let set = t.strings.intern("Memset (Device)");
        for name in [mangled, plain, mangled] {
            t.kernels.push(KernelRow {
                name,
                ..Default::default()
            });
        }
        t.memops.push(MemopRow {
            name: set,
            kind: MemopKind::Memset as u8,
            ..Default::default()
        });
        let r = canonicalise(&mut t);
        assert_eq!(
            r,
            Canonicalised {
                renamed: 2,
                raw_names_dropped: 0
            }
        );
        let names: Vec<&str> = t.kernels.name.iter().map(|&i| t.strings.get(i)).collect();
        assert_eq!(
            names,
            [
                "scale(float*, int, float)",
                "nvjet_x",
                "scale(float*, int, float)"
            ]
        );
        assert_eq!(t.strings.get(t.memops.name[0]), "Memset");
        assert_eq!(
            t.manifest.raw_names["scale(float*, int, float)"],
            "_Z5scalePfif"
        );
        assert_eq!(t.manifest.raw_names["Memset"], "Memset (Device)");
        assert_eq!(t.manifest.raw_names.len(), 2);
        // A second pass changes nothing.
        let before = t.kernels.name.clone();
        assert_eq!(canonicalise(&mut t), Canonicalised::default());
        assert_eq!(t.kernels.name, before);
    }
}
