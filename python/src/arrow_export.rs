//! Tables handed to Python through the Arrow PyCapsule interface (`__arrow_c_stream__`):
//! pyarrow, polars and duckdb import the record batches' buffers in place, so a table
//! crosses into Python without a copy.

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{RecordBatch, RecordBatchIterator};
use arrow_schema::SchemaRef;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// One table: its schema and record batches (shared, never copied when exported).
#[pyclass(frozen, module = "gapscope._native")]
pub struct ArrowTable {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
}

impl ArrowTable {
    pub fn new(schema: SchemaRef, batches: Vec<RecordBatch>) -> Self {
        Self { schema, batches }
    }

    pub fn one(batch: RecordBatch) -> Self {
        Self::new(batch.schema(), vec![batch])
    }
}

#[pymethods]
impl ArrowTable {
    /// The Arrow C stream of this table, as a PyCapsule (the Arrow PyCapsule interface).
    /// A requested schema is not applied: the caller casts if it needs to.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let reader = RecordBatchIterator::new(
            self.batches.clone().into_iter().map(Ok),
            self.schema.clone(),
        );
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    /// Rows in all batches together.
    #[getter]
    fn num_rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    /// Column names in schema order.
    #[getter]
    fn column_names(&self) -> Vec<String> {
        self.schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }

    fn __len__(&self) -> usize {
        self.num_rows()
    }
}
