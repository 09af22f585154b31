//! The eframe explorer.
