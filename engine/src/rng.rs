//! Seeded, position-addressable random numbers for random weights and prompts. Every value is a
//! pure function of (seed, stream, index), so tensors can be filled in parallel and the CPU
//! reference and the GPU run see the same weights.

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Uniform in [-1, 1).
pub fn uniform(seed: u64, stream: u64, index: u64) -> f32 {
    let h = splitmix64(seed ^ splitmix64(stream.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ index));
    ((h >> 40) as f32) / (1u64 << 23) as f32 - 1.0
}

/// Fills `out` with `center + scale * uniform`, in parallel for large tensors.
pub fn fill(out: &mut [f32], seed: u64, stream: u64, center: f32, scale: f32) {
    const CHUNK: usize = 1 << 20;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if out.len() < 2 * CHUNK || threads == 1 {
        for (i, v) in out.iter_mut().enumerate() {
            *v = center + scale * uniform(seed, stream, i as u64);
        }
        return;
    }
    let per = out.len().div_ceil(threads).max(CHUNK);
    std::thread::scope(|s| {
        for (t, part) in out.chunks_mut(per).enumerate() {
            s.spawn(move || {
                let base = (t * per) as u64;
                for (i, v) in part.iter_mut().enumerate() {
                    *v = center + scale * uniform(seed, stream, base + i as u64);
                }
            });
        }
    });
}

/// `n` token ids in [0, vocab).
pub fn tokens(seed: u64, stream: u64, n: usize, vocab: usize) -> Vec<i32> {
    (0..n)
        .map(|i| {
            let h = splitmix64(seed ^ splitmix64(stream ^ 0xdead_beef ^ (i as u64) << 1));
            (h % vocab as u64) as i32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_is_in_range_and_roughly_centered() {
        let n = 100_000;
        let mut sum = 0f64;
        for i in 0..n {
            let u = uniform(7, 1, i);
            assert!((-1.0..1.0).contains(&u));
            sum += f64::from(u);
        }
        assert!((sum / n as f64).abs() < 0.01);
        assert_ne!(uniform(7, 1, 0), uniform(7, 2, 0));
        assert_ne!(uniform(7, 1, 0), uniform(8, 1, 0));
    }

    #[test]
    fn parallel_fill_equals_serial() {
        let mut a = vec![0f32; 5 << 20];
        fill(&mut a, 3, 9, 0.0, 1.0);
        for i in [0usize, 1 << 20, (5 << 20) - 1, 3_000_001] {
            assert_eq!(a[i], uniform(3, 9, i as u64));
        }
    }
}
