//! The explorer's views. Each draws the analyzer's typed data; none computes a figure.

pub mod diff;
pub mod digit_text;
pub mod flows;
pub mod format;
pub mod hover;
pub mod kernels;
pub mod label_place;
pub mod lane_rows;
pub mod ranks;
pub mod ranks_text;
pub mod roofline;
pub mod roofline_chart;
pub mod roofline_text;
pub mod row_paint;
pub mod search;
pub mod step_names;
pub mod steps;
pub mod telemetry;
pub mod timeline;
pub mod timeline_bar;
pub mod tooltip;
pub mod track_paint;
pub mod track_ui;

/// The view shown in the main area.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum View {
    #[default]
    Timeline,
    Steps,
    Kernels,
    Diff,
    Roofline,
    Telemetry,
    Ranks,
}

impl View {
    pub const ALL: [View; 7] = [
        View::Timeline,
        View::Steps,
        View::Kernels,
        View::Diff,
        View::Roofline,
        View::Telemetry,
        View::Ranks,
    ];

    pub fn name(self) -> &'static str {
        match self {
            View::Timeline => "timeline",
            View::Steps => "steps",
            View::Kernels => "kernels",
            View::Diff => "diff",
            View::Roofline => "roofline",
            View::Telemetry => "telemetry",
            View::Ranks => "ranks",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.name() == s)
    }
}
