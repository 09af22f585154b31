//! An in-memory trace: the manifest, the interned names and the seven tables.

use crate::manifest::Manifest;
use crate::strings::StringTable;
use crate::tables::{
    InputDimTable, KernelTable, LaunchTable, MarkerTable, MemopTable, SampleTable, ScopeTable,
};

/// One run on one or more GPUs, as every importer produces and every analysis consumes.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub manifest: Manifest,
    pub strings: StringTable,
    pub kernels: KernelTable,
    pub memops: MemopTable,
    pub launches: LaunchTable,
    pub markers: MarkerTable,
    pub samples: SampleTable,
    pub scopes: ScopeTable,
    /// Input shapes of the host ops that analyses read (rows point into `scopes`).
    pub input_dims: InputDimTable,
}

impl Trace {
    pub fn new(manifest: Manifest) -> Self {
        Self {
            manifest,
            ..Self::default()
        }
    }
}
