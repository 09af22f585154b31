//! The gapscope explorer: an eframe/egui window over the analyzer's typed reports. Every
//! figure it shows comes from `gapscope-analyzer`; this crate only draws (and keeps the
//! level of detail that drawing 10M kernels needs).

#![forbid(unsafe_code)]

pub mod app;
pub mod axis;
pub mod doc;
pub mod file_dialog;
pub mod loader;
pub mod lod;
pub mod palette;
pub mod screenshot;
pub mod set_loader;
pub mod settings;
pub mod tracks;
pub mod views;

pub use app::App;
pub use settings::Settings;
