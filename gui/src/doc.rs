//! One open trace: loading, failed, or ready, with its timeline state.

use std::path::PathBuf;
use std::sync::Arc;

use crate::loader::{Loaded, Progress};
use crate::set_loader::SetLoad;
use crate::views::timeline::TimelineState;

pub enum DocState {
    Loading(Arc<Progress>),
    Failed(String),
    Ready(Box<Loaded>),
}

pub struct Doc {
    pub path: PathBuf,
    pub state: DocState,
    pub timeline: TimelineState,
    /// Several traces opening together: this document stands for them until they are in.
    pub set: Option<SetLoad>,
}

impl Doc {
    pub fn title(&self) -> String {
        self.path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.path.display().to_string())
    }

    pub fn loaded(&self) -> Option<&Loaded> {
        match &self.state {
            DocState::Ready(l) => Some(l),
            _ => None,
        }
    }

    /// Moves a finished load into the document; true when the state changed.
    pub fn poll(&mut self) -> bool {
        let DocState::Loading(p) = &self.state else {
            return false;
        };
        match p.take() {
            None => false,
            Some(Ok(l)) => {
                self.timeline.reset(&l);
                self.state = DocState::Ready(Box::new(l));
                true
            }
            Some(Err(e)) => {
                self.state = DocState::Failed(e);
                true
            }
        }
    }
}
