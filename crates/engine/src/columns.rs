//! Building an Arrow table column by column (the engine's tables are
//! built once, after the pass, from per-connection or per-request rows).

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampNanosecondArray, UInt16Array, UInt32Array, UInt64Array, UInt8Array,
};
use arrow_schema::{Field, Schema};

/// Columns under construction.
#[derive(Default)]
pub(crate) struct Cols {
    fields: Vec<Field>,
    arrays: Vec<ArrayRef>,
}

impl Cols {
    pub(crate) fn push(&mut self, name: &str, nullable: bool, a: ArrayRef) {
        self.fields
            .push(Field::new(name, a.data_type().clone(), nullable));
        self.arrays.push(a);
    }
    pub(crate) fn u8o(&mut self, name: &str, v: Vec<Option<u8>>) {
        self.push(name, true, Arc::new(UInt8Array::from(v)));
    }
    pub(crate) fn u16o(&mut self, name: &str, v: Vec<Option<u16>>) {
        self.push(name, true, Arc::new(UInt16Array::from(v)));
    }
    pub(crate) fn u32(&mut self, name: &str, v: Vec<u32>) {
        self.push(name, false, Arc::new(UInt32Array::from(v)));
    }
    pub(crate) fn u64(&mut self, name: &str, v: Vec<u64>) {
        self.push(name, false, Arc::new(UInt64Array::from(v)));
    }
    pub(crate) fn u64o(&mut self, name: &str, v: Vec<Option<u64>>) {
        self.push(name, true, Arc::new(UInt64Array::from(v)));
    }
    pub(crate) fn i64(&mut self, name: &str, v: Vec<i64>) {
        self.push(name, false, Arc::new(Int64Array::from(v)));
    }
    pub(crate) fn i64o(&mut self, name: &str, v: Vec<Option<i64>>) {
        self.push(name, true, Arc::new(Int64Array::from(v)));
    }
    pub(crate) fn f64(&mut self, name: &str, v: Vec<f64>) {
        self.push(name, false, Arc::new(Float64Array::from(v)));
    }
    pub(crate) fn f64o(&mut self, name: &str, v: Vec<Option<f64>>) {
        self.push(name, true, Arc::new(Float64Array::from(v)));
    }
    pub(crate) fn bool(&mut self, name: &str, v: Vec<bool>) {
        self.push(name, false, Arc::new(BooleanArray::from(v)));
    }
    /// Texts, owned or borrowed: a borrowed one is copied once, into the
    /// array (a `String` made for each row first was a large part of a
    /// table's making with thousands of rows).
    pub(crate) fn str<S: AsRef<str>>(&mut self, name: &str, v: impl IntoIterator<Item = S>) {
        self.push(name, false, Arc::new(StringArray::from_iter_values(v)));
    }
    pub(crate) fn stro<S: AsRef<str>>(
        &mut self,
        name: &str,
        v: impl IntoIterator<Item = Option<S>>,
    ) {
        self.push(name, true, Arc::new(v.into_iter().collect::<StringArray>()));
    }
    pub(crate) fn ts(&mut self, name: &str, v: Vec<i64>) {
        let a = TimestampNanosecondArray::from(v).with_timezone("UTC");
        self.push(name, false, Arc::new(a));
    }
    pub(crate) fn finish(self, what: &str) -> RecordBatch {
        RecordBatch::try_new(Arc::new(Schema::new(self.fields)), self.arrays)
            .unwrap_or_else(|e| panic!("{what} columns match their schema: {e}"))
    }
}
