//! The timeline's horizontal axis: time (ns from the trace's start), or step-aligned,
//! where every step gets the same width so the same kernel lines up from step to step
//! (Firefox Profiler's "same widths", rerun's gap-compressed axis). Positions on the axis
//! are f64 "units"; pixels come last, relative to the view's left edge.

/// Units a gap between steps takes in the step-aligned axis (a step takes 1).
pub const STEP_GAP_UNITS: f64 = 0.12;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AxisMode {
    #[default]
    Time,
    StepAligned,
}

/// Monotonic map from trace time to axis units.
#[derive(Debug, Clone)]
pub struct Axis {
    pub mode: AxisMode,
    origin_ns: i64,
    /// Step-aligned: (time, unit) knots, both non-decreasing; linear in between.
    knots: Vec<(i64, f64)>,
    span: (i64, i64),
}

impl Axis {
    /// `steps`: the step windows in time order; `span`: the trace's first and last instant.
    pub fn new(mode: AxisMode, span: (i64, i64), steps: &[(i64, i64)]) -> Self {
        let mode = if steps.is_empty() {
            AxisMode::Time
        } else {
            mode
        };
        let mut knots = Vec::new();
        if mode == AxisMode::StepAligned {
            let mut u = 0.0;
            let mut last_t = i64::MIN;
            if span.0 < steps[0].0 {
                knots.push((span.0, -1.0));
            }
            for (k, &(a, b)) in steps.iter().enumerate() {
                if k > 0 {
                    u += STEP_GAP_UNITS;
                }
                let a = a.max(last_t);
                let b = b.max(a);
                knots.push((a, u));
                u += 1.0;
                knots.push((b, u));
                last_t = b;
            }
            if span.1 > last_t {
                knots.push((span.1, u + 1.0));
            }
        }
        Self {
            mode,
            origin_ns: span.0,
            knots,
            span,
        }
    }

    pub fn to_u(&self, t: i64) -> f64 {
        match self.mode {
            AxisMode::Time => (t - self.origin_ns) as f64,
            AxisMode::StepAligned => {
                let k = self.knots.partition_point(|&(kt, _)| kt <= t);
                if k == 0 {
                    return self.knots[0].1;
                }
                if k == self.knots.len() {
                    return self.knots[k - 1].1;
                }
                let ((t0, u0), (t1, u1)) = (self.knots[k - 1], self.knots[k]);
                if t1 == t0 {
                    u1
                } else {
                    u0 + (u1 - u0) * ((t - t0) as f64 / (t1 - t0) as f64)
                }
            }
        }
    }

    pub fn from_u(&self, u: f64) -> i64 {
        match self.mode {
            AxisMode::Time => {
                let t = self.origin_ns as f64 + u;
                t.clamp(i64::MIN as f64 / 2.0, i64::MAX as f64 / 2.0) as i64
            }
            AxisMode::StepAligned => {
                let k = self.knots.partition_point(|&(_, ku)| ku <= u);
                if k == 0 {
                    return self.knots[0].0;
                }
                if k == self.knots.len() {
                    return self.knots[k - 1].0;
                }
                let ((t0, u0), (t1, u1)) = (self.knots[k - 1], self.knots[k]);
                if u1 == u0 {
                    t0
                } else {
                    t0 + ((t1 - t0) as f64 * ((u - u0) / (u1 - u0))).round() as i64
                }
            }
        }
    }

    /// The whole trace in units.
    pub fn extent(&self) -> (f64, f64) {
        match self.mode {
            AxisMode::Time => (0.0, (self.span.1 - self.span.0).max(1) as f64),
            AxisMode::StepAligned => (
                self.knots.first().map_or(0.0, |k| k.1),
                self.knots.last().map_or(1.0, |k| k.1),
            ),
        }
    }

    pub fn origin_ns(&self) -> i64 {
        self.origin_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_aligned_gives_every_step_one_unit() {
        let steps = [(100, 200), (300, 1300), (1300, 1400)];
        let ax = Axis::new(AxisMode::StepAligned, (0, 2000), &steps);
        assert_eq!(ax.to_u(100), 0.0);
        assert_eq!(ax.to_u(150), 0.5);
        assert_eq!(ax.to_u(200), 1.0);
        assert!((ax.to_u(800) - (1.0 + STEP_GAP_UNITS + 0.5)).abs() < 1e-12);
        // The long second step and the short third take the same width.
        let w2 = ax.to_u(1299) - ax.to_u(300);
        let w3 = ax.to_u(1400) - ax.to_u(1300);
        assert!(
            (w2 - 0.999).abs() < 1e-12 && (w3 - 1.0).abs() < 1e-12,
            "{w2} {w3}"
        );
        for t in [0, 50, 100, 777, 1350, 1999] {
            assert!((ax.from_u(ax.to_u(t)) - t).abs() <= 1, "{t}");
        }
        let lin = Axis::new(
            AxisMode::Time,
            (1_000_000_000_000, 1_000_000_001_000),
            &steps,
        );
        assert_eq!(lin.to_u(1_000_000_000_500), 500.0);
    }
}
