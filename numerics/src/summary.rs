//! Figures over all positions: KL, top-1 agreement, |Δ log p|, perplexities and Δppl with a
//! paired bootstrap interval across passages.

use crate::positions::PositionRow;

/// Over every position of a comparison.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Summary {
    pub positions: usize,
    /// Positions with a next token (all but each passage's last).
    pub scored: usize,
    pub kl_mean: f64,
    pub kl_max: f64,
    /// Where the largest KL is: (passage, position).
    pub kl_max_at: (u32, u32),
    pub top1_agreement_pct: f64,
    /// The first position whose top-1 differs.
    pub first_disagreement: Option<(u32, u32)>,
    pub dlogp_mean: f64,
    pub dlogp_max: f64,
    /// exp(mean negative log-likelihood of the next tokens).
    pub ppl_reference: f64,
    pub ppl_other: f64,
    /// 100 × (ppl_other / ppl_reference − 1).
    pub dppl_pct: f64,
    /// 95% paired bootstrap interval of `dppl_pct`, resampling passages (two or more).
    pub dppl_ci_pct: Option<(f64, f64)>,
}

/// Resamples of the paired bootstrap.
pub const BOOTSTRAP_SAMPLES: usize = 2000;

pub fn summarise(rows: &[PositionRow], passages: usize, seed: u64) -> Summary {
    let n = rows.len().max(1);
    let kl_mean = rows.iter().map(|r| r.kl).sum::<f64>() / n as f64;
    let worst = rows
        .iter()
        .max_by(|a, b| a.kl.total_cmp(&b.kl))
        .map_or((0.0, (0, 0)), |r| (r.kl, (r.passage, r.position)));
    let agree = rows.iter().filter(|r| r.agrees()).count();
    let first_disagreement = rows
        .iter()
        .find(|r| !r.agrees())
        .map(|r| (r.passage, r.position));
    // Per passage: summed NLL under each and the count, for Δppl and its bootstrap.
    let mut per = vec![(0.0f64, 0.0f64, 0usize); passages.max(1)];
    let (mut dsum, mut dmax, mut scored) = (0.0f64, 0.0f64, 0usize);
    for r in rows {
        if let (Some(lr), Some(lo), Some(d)) = (r.logp_reference, r.logp_other, r.dlogp()) {
            let p = &mut per[(r.passage as usize).min(passages.max(1) - 1)];
            p.0 -= lr;
            p.1 -= lo;
            p.2 += 1;
            dsum += d;
            dmax = dmax.max(d);
            scored += 1;
        }
    }
    let dppl = |idx: &mut dyn Iterator<Item = usize>| {
        let (mut a, mut b, mut c) = (0.0, 0.0, 0usize);
        for i in idx {
            a += per[i].0;
            b += per[i].1;
            c += per[i].2;
        }
        let c = c.max(1) as f64;
        ((a / c).exp(), (b / c).exp())
    };
    let (ppl_reference, ppl_other) = dppl(&mut (0..per.len()));
    let pct = |(r, o): (f64, f64)| 100.0 * (o / r - 1.0);
    let dppl_ci_pct = (per.len() >= 2 && scored > 0).then(|| {
        let mut rng = SplitMix(seed);
        let mut samples: Vec<f64> = (0..BOOTSTRAP_SAMPLES)
            .map(|_| {
                let k = per.len();
                pct(dppl(&mut (0..k).map(|_| (rng.next() % k as u64) as usize)))
            })
            .collect();
        samples.sort_by(f64::total_cmp);
        let at = |q: f64| samples[((q * (samples.len() - 1) as f64).round()) as usize];
        (at(0.025), at(0.975))
    });
    Summary {
        positions: rows.len(),
        scored,
        kl_mean,
        kl_max: worst.0,
        kl_max_at: worst.1,
        top1_agreement_pct: 100.0 * agree as f64 / n as f64,
        first_disagreement,
        dlogp_mean: dsum / scored.max(1) as f64,
        dlogp_max: dmax,
        ppl_reference,
        ppl_other,
        dppl_pct: pct((ppl_reference, ppl_other)),
        dppl_ci_pct,
    }
}

/// SplitMix64: a seeded generator, so an interval is the same on every run.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
