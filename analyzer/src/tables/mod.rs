//! The analysis as typed tables: what every front end (the report, diff, gate, explorer,
//! Parquet export and, later, Python) reads. Each table is declared with `columnar_table!`,
//! so its Arrow schema comes from the same declaration and a table goes to Arrow as record
//! batches. Enumerations are stored as `u8` codes ([`Role`], [`ActivityKind`], [`GapKind`],
//! [`ChargeKind`], [`NameScope`], `Phase`, [`crate::Bucket`] as its index in
//! [`crate::Bucket::ALL`]); names as ids into the trace's string table.
//!
//! Every row carries `rank` (0 for a one-process trace) and steps and activities a `role`
//! (`target` for today's traces): the speculative-decoding and multi-rank analyses fill them
//! better without changing a table's shape.

pub mod activities;
pub mod gaps;
pub mod names;
pub mod steps;

use gapscope_traces::arrow_array::RecordBatch;
use gapscope_traces::arrow_schema::ArrowError;

pub use activities::{ActivityRow, ActivityTable};
pub use gaps::{IdleGapRow, IdleGapTable, StepScopeRow, StepScopeTable};
pub use names::{NameTimeRow, NameTimeTable};
pub use steps::{StepBucketRow, StepBucketTable, StepBuckets, StepRow, StepTable};

/// `u32` for "no step" in the per-activity step columns.
pub const NO_STEP: u32 = u32::MAX;

/// What a step or an activity did for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Role {
    /// The model whose tokens the run produces (every step of a run without drafts).
    Target = 0,
    /// A speculative-decoding draft model (MTP/NextN heads, an EAGLE or small draft model).
    Draft = 1,
    /// Prompt processing.
    Prefill = 2,
    /// Sampling, rejection and bookkeeping between forwards.
    Sample = 3,
}

impl Role {
    pub const ALL: [Role; 4] = [Self::Target, Self::Draft, Self::Prefill, Self::Sample];

    pub fn from_code(c: u8) -> Option<Self> {
        Self::ALL.get(c as usize).copied()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Target => "target",
            Self::Draft => "draft",
            Self::Prefill => "prefill",
            Self::Sample => "sample",
        }
    }
}

/// A GPU activity: a kernel or a memory operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum ActivityKind {
    Kernel = 0,
    Memop = 1,
}

impl ActivityKind {
    pub fn from_code(c: u8) -> Self {
        if c == 1 { Self::Memop } else { Self::Kernel }
    }
}

/// Where an idle gap lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum GapKind {
    /// Between two activities of one step.
    InsideStep = 0,
    /// From the previous step's last activity to this step's first.
    BetweenSteps = 1,
}

impl GapKind {
    pub fn from_code(c: u8) -> Self {
        if c == 1 {
            Self::BetweenSteps
        } else {
            Self::InsideStep
        }
    }
}

/// What idle host time is charged to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum ChargeKind {
    /// A host scope (an op, a module, a Python function, an annotation).
    Scope = 0,
    /// A runtime call that issues no GPU work (an allocation, module loading).
    Api = 1,
}

/// Which steps a per-name aggregation covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum NameScope {
    /// The steps the report's buckets cover: decode steps, else the training iterations or
    /// every step, else the whole trace.
    Report = 0,
    /// Prefill steps.
    Prefill = 1,
}

/// Every table of one analysed run.
#[derive(Debug, Clone, Default)]
pub struct Tables {
    /// Every step, in time order.
    pub steps: StepTable,
    /// GPU time per step and bucket (rows only where the step has activity in the bucket).
    pub step_buckets: StepBuckets,
    /// Idle gaps of the steps whose idle the analysis attributes, with their host cause.
    pub idle_gaps: IdleGapTable,
    /// Host time charged per step to each host scope or runtime call during idle gaps.
    pub step_scopes: StepScopeTable,
    /// Time per kernel or memop name over the report's steps and over prefill steps: the
    /// one definition of a name's time that the report's top lists and the diff read.
    pub names: NameTimeTable,
    /// Per activity: its bucket ([`crate::Bucket::ALL`] index) and its step ([`NO_STEP`]
    /// outside the steps or on another device), indexed like the trace's kernel and memop
    /// tables.
    pub kernel_bucket: Vec<u8>,
    pub memop_bucket: Vec<u8>,
    pub kernel_step: Vec<u32>,
    pub memop_step: Vec<u32>,
    /// The run's rank.
    pub rank: u32,
}

impl Tables {
    /// The steps the report's figures cover, as indices into [`Tables::steps`].
    pub fn report_steps(&self) -> Vec<usize> {
        (0..self.steps.len)
            .filter(|&i| self.steps.in_report[i] != 0)
            .collect()
    }

    /// The step table as one record batch, `report_step` null for the steps outside the
    /// report (in memory they hold -1).
    pub fn steps_batch(&self) -> Result<RecordBatch, ArrowError> {
        use gapscope_traces::arrow_array::{ArrayRef, Int64Array};
        use gapscope_traces::arrow_schema::{DataType, Field, Schema};
        let b = self.steps.to_batch(0..self.steps.len)?;
        let schema = b.schema();
        let at = schema.index_of("report_step")?;
        let mut fields = schema.fields().to_vec();
        fields[at] = std::sync::Arc::new(Field::new("report_step", DataType::Int64, true));
        let mut columns = b.columns().to_vec();
        let numbers: Int64Array = self
            .steps
            .report_step
            .iter()
            .map(|&n| (n >= 0).then_some(n))
            .collect();
        columns[at] = std::sync::Arc::new(numbers) as ArrayRef;
        RecordBatch::try_new(std::sync::Arc::new(Schema::new(fields)), columns)
    }

    /// The derived tables as named record batches (the activity table is built from the
    /// trace: see [`ActivityTable::build`]).
    pub fn record_batches(&self) -> Result<Vec<(&'static str, RecordBatch)>, ArrowError> {
        Ok(vec![
            ("steps", self.steps_batch()?),
            (
                "step_buckets",
                self.step_buckets
                    .table
                    .to_batch(0..self.step_buckets.table.len)?,
            ),
            ("idle_gaps", self.idle_gaps.to_batch(0..self.idle_gaps.len)?),
            (
                "step_scopes",
                self.step_scopes.to_batch(0..self.step_scopes.len)?,
            ),
            ("names", self.names.to_batch(0..self.names.len)?),
        ])
    }
}
