//! The `columnar_table!` macro: one declaration gives a table's in-memory columns, its row
//! type, its Arrow schema and its conversion to and from Arrow record batches, so the five
//! tables cannot drift apart from their on-disk schema.

/// Declares a columnar table. Every column is a primitive Arrow type; names are interned
/// elsewhere and stored as `u32` ids.
#[macro_export]
macro_rules! columnar_table {
    (
        $(#[$meta:meta])*
        pub struct $table:ident / $row:ident {
            $( $(#[$cmeta:meta])* $col:ident : $ty:ty => $arrow:ident = $default:expr ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default)]
        pub struct $table {
            /// Row count. Columns left out by a projected read stay empty, so use this,
            /// not a column's length.
            pub len: usize,
            $( $(#[$cmeta])* pub $col: Vec<$ty>, )+
        }

        /// One row of the table, for builders and tests.
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub struct $row {
            $( $(#[$cmeta])* pub $col: $ty, )+
        }

        impl Default for $row {
            fn default() -> Self {
                Self { $( $col: $default, )+ }
            }
        }

        impl $table {
            /// Column names in schema order.
            pub const COLUMNS: &'static [&'static str] = &[ $( stringify!($col) ),+ ];

            pub fn len(&self) -> usize {
                self.len
            }

            pub fn is_empty(&self) -> bool {
                self.len == 0
            }

            /// Appends one row (every column must be loaded).
            pub fn push(&mut self, r: $row) {
                $( self.$col.push(r.$col); )+
                self.len += 1;
            }

            /// Reads row `i` back; every column must be loaded.
            pub fn row(&self, i: usize) -> $row {
                $row { $( $col: self.$col[i], )+ }
            }

            /// Reserves room for `n` more rows.
            pub fn reserve(&mut self, n: usize) {
                $( self.$col.reserve(n); )+
            }

            /// Reserves room for exactly `n` more rows in the columns named in `columns`,
            /// faulting their memory in at once where the system allows (see
            /// [`$crate::columnar::reserve_populated`]).
            /// Columns also named in `sparse` are reserved but not faulted in: they may stay
            /// empty (see [`Self::append_batch_sparse`]).
            pub fn reserve_columns(&mut self, n: usize, columns: &[&str], sparse: &[&str]) {
                $( if columns.contains(&stringify!($col)) {
                    if sparse.contains(&stringify!($col)) {
                        self.$col.reserve_exact(n);
                    } else {
                        $crate::columnar::reserve_populated(&mut self.$col, n);
                    }
                } )+
            }

            /// Frees the room reserved in columns that stayed empty.
            pub fn release_empty_columns(&mut self) {
                $( if self.$col.is_empty() {
                    self.$col = Vec::new();
                } )+
            }

            /// Takes the columns `other` loaded and this table did not: two reads of one
            /// stream, each loading part of the columns, become one table.
            pub fn adopt_columns(&mut self, other: Self) {
                debug_assert_eq!(self.len, other.len);
                $( if self.$col.is_empty() && !other.$col.is_empty() {
                    self.$col = other.$col;
                } )+
            }

            /// The rows whose `keep` is true, in order (`keep` has one entry per row);
            /// columns left empty by a projected read stay empty.
            pub fn select(&self, keep: &[bool]) -> Self {
                debug_assert_eq!(keep.len(), self.len);
                let len = keep.iter().filter(|k| **k).count();
                Self {
                    len,
                    $( $col: if self.$col.is_empty() {
                        Vec::new()
                    } else {
                        self.$col
                            .iter()
                            .zip(keep)
                            .filter_map(|(v, k)| k.then_some(*v))
                            .collect()
                    }, )+
                }
            }

            pub fn clear(&mut self) {
                $( self.$col.clear(); )+
                self.len = 0;
            }

            /// Whether every column is loaded (false after a projected read).
            pub fn is_complete(&self) -> bool {
                true $( && self.$col.len() == self.len )+
            }

            /// The Arrow schema of this table.
            pub fn schema() -> ::std::sync::Arc<$crate::arrow_schema::Schema> {
                ::std::sync::Arc::new($crate::arrow_schema::Schema::new(vec![
                    $( $crate::arrow_schema::Field::new(
                        stringify!($col),
                        <$crate::arrow_array::types::$arrow as $crate::arrow_array::types::ArrowPrimitiveType>::DATA_TYPE,
                        false,
                    ), )+
                ]))
            }

            /// Rows `range` as one record batch.
            pub fn to_batch(&self, range: ::std::ops::Range<usize>)
                -> Result<$crate::arrow_array::RecordBatch, $crate::arrow_schema::ArrowError>
            {
                let columns: Vec<$crate::arrow_array::ArrayRef> = vec![
                    $( ::std::sync::Arc::new(
                        $crate::arrow_array::PrimitiveArray::<$crate::arrow_array::types::$arrow>::from(
                            self.$col[range.clone()].to_vec(),
                        ),
                    ), )+
                ];
                $crate::arrow_array::RecordBatch::try_new(Self::schema(), columns)
            }

            /// The table as one record batch whose columns are this table's vectors, moved,
            /// not copied (what Python's zero-copy tables hand over). A column left unloaded
            /// by a projected read is filled with its default.
            pub fn into_batch(self)
                -> Result<$crate::arrow_array::RecordBatch, $crate::arrow_schema::ArrowError>
            {
                let len = self.len;
                let columns: Vec<$crate::arrow_array::ArrayRef> = vec![
                    $( {
                        let mut v: Vec<$ty> = self.$col;
                        if v.len() != len {
                            v = vec![$default; len];
                        }
                        ::std::sync::Arc::new(
                            $crate::arrow_array::PrimitiveArray::<$crate::arrow_array::types::$arrow>::new(
                                $crate::arrow_buffer::ScalarBuffer::from(v),
                                None,
                            ),
                        )
                    }, )+
                ];
                $crate::arrow_array::RecordBatch::try_new(Self::schema(), columns)
            }

            /// Appends a record batch, taking columns by name. Columns absent from the batch
            /// stay unloaded; a column of the wrong type is an error.
            pub fn append_batch(&mut self, batch: &$crate::arrow_array::RecordBatch)
                -> Result<(), String>
            {
                self.append_batch_sparse(batch, &[])
            }

            /// [`Self::append_batch`], except that a column named in `sparse` stays unloaded
            /// (empty) for as long as every value appended to it is the column's default: it
            /// is filled in with the default up to the first batch that holds another value.
            /// For readers that take a missing column as all-default.
            pub fn append_batch_sparse(
                &mut self,
                batch: &$crate::arrow_array::RecordBatch,
                sparse: &[&str],
            ) -> Result<(), String>
            {
                use $crate::arrow_array::cast::AsArray;
                use $crate::arrow_array::Array;
                $(
                    if let Some(array) = batch.column_by_name(stringify!($col)) {
                        let Some(a) = array.as_primitive_opt::<$crate::arrow_array::types::$arrow>() else {
                            return Err(format!(
                                "column {} has type {}, expected {}",
                                stringify!($col),
                                array.data_type(),
                                <$crate::arrow_array::types::$arrow as $crate::arrow_array::types::ArrowPrimitiveType>::DATA_TYPE,
                            ));
                        };
                        let d: $ty = $default;
                        let skip = self.$col.is_empty()
                            && sparse.contains(&stringify!($col))
                            && a.null_count() == 0
                            && $crate::columnar::all_equal(a.values(), d);
                        if !skip {
                            if self.$col.is_empty() && self.len > 0 && sparse.contains(&stringify!($col)) {
                                // The rows before, all the default, left out until now.
                                self.$col.resize(self.len, d);
                            }
                            if a.null_count() > 0 {
                                self.$col.extend(a.iter().map(|v| v.unwrap_or(d)));
                            } else {
                                self.$col.extend_from_slice(a.values());
                            }
                        }
                    }
                )+
                self.len += batch.num_rows();
                Ok(())
            }
        }
    };
}

/// Reserves room for exactly `n` more values and, on Linux, asks the kernel to map that
/// memory in now (`MADV_POPULATE_WRITE`): one call instead of a page fault per 4 KiB as the
/// column fills. A column of a large table is its own mapping, so nothing else is touched;
/// where the call is refused (an older kernel) the pages fault in as usual.
#[doc(hidden)]
pub fn reserve_populated<T: Copy>(v: &mut Vec<T>, n: usize) {
    v.reserve_exact(n);
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let spare = v.spare_capacity_mut();
        let bytes = std::mem::size_of_val(spare);
        if bytes < 16 * PAGE {
            return;
        }
        let start = spare.as_mut_ptr() as usize;
        let first = start.div_ceil(PAGE) * PAGE;
        let end = (start + bytes) / PAGE * PAGE;
        if end > first {
            // SAFETY: whole pages inside this vector's own allocation; populating writes
            // nothing (fresh pages read as zero, others keep their bytes).
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    end - first,
                    libc::MADV_POPULATE_WRITE,
                );
            }
        }
    }
}

/// Whether every value equals `d` (branch-free over chunks, so it vectorises).
#[doc(hidden)]
pub fn all_equal<T: Copy + PartialEq>(v: &[T], d: T) -> bool {
    v.chunks(256)
        .all(|c| c.iter().fold(true, |all, &x| all & (x == d)))
}
