//! Table columns as Python lists, for callers that want plain values and not
//! pyarrow: importing pyarrow takes about 60 MB and a tenth of a second of
//! CPU, more than the command-line run needs from its small summary tables.
//! Timestamps become integer nanoseconds since the epoch (what the rules
//! use), nulls `None`.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrowPrimitiveType, PrimitiveArray};
use arrow_schema::{DataType, TimeUnit};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyList;

fn primitive<'py, T>(py: Python<'py>, a: &PrimitiveArray<T>) -> PyResult<Bound<'py, PyList>>
where
    T: ArrowPrimitiveType,
    T::Native: IntoPyObject<'py>,
{
    PyList::new(
        py,
        (0..a.len()).map(|i| (!a.is_null(i)).then(|| a.value(i))),
    )
}

/// A timestamp column in `ns` nanoseconds per unit, as nanoseconds.
fn timestamps<'py, T>(
    py: Python<'py>,
    a: &PrimitiveArray<T>,
    ns: i64,
) -> PyResult<Bound<'py, PyList>>
where
    T: ArrowPrimitiveType<Native = i64>,
{
    let items = (0..a.len()).map(|i| (!a.is_null(i)).then(|| a.value(i).saturating_mul(ns)));
    PyList::new(py, items)
}

/// One column (any of the types the engine's tables use) as a list.
pub fn to_list<'py>(py: Python<'py>, a: &dyn Array) -> PyResult<Bound<'py, PyList>> {
    match a.data_type() {
        DataType::UInt8 => primitive(py, a.as_primitive::<UInt8Type>()),
        DataType::UInt16 => primitive(py, a.as_primitive::<UInt16Type>()),
        DataType::UInt32 => primitive(py, a.as_primitive::<UInt32Type>()),
        DataType::UInt64 => primitive(py, a.as_primitive::<UInt64Type>()),
        DataType::Int8 => primitive(py, a.as_primitive::<Int8Type>()),
        DataType::Int16 => primitive(py, a.as_primitive::<Int16Type>()),
        DataType::Int32 => primitive(py, a.as_primitive::<Int32Type>()),
        DataType::Int64 => primitive(py, a.as_primitive::<Int64Type>()),
        DataType::Float32 => primitive(py, a.as_primitive::<Float32Type>()),
        DataType::Float64 => primitive(py, a.as_primitive::<Float64Type>()),
        DataType::Boolean => {
            let b = a.as_boolean();
            let items = (0..b.len()).map(|i| (!b.is_null(i)).then(|| b.value(i)));
            PyList::new(py, items)
        }
        DataType::Utf8 => {
            let s = a.as_string::<i32>();
            PyList::new(
                py,
                (0..s.len()).map(|i| (!s.is_null(i)).then(|| s.value(i))),
            )
        }
        DataType::LargeUtf8 => {
            let s = a.as_string::<i64>();
            PyList::new(
                py,
                (0..s.len()).map(|i| (!s.is_null(i)).then(|| s.value(i))),
            )
        }
        DataType::Timestamp(unit, _) => match unit {
            TimeUnit::Second => {
                timestamps(py, a.as_primitive::<TimestampSecondType>(), 1_000_000_000)
            }
            TimeUnit::Millisecond => {
                timestamps(py, a.as_primitive::<TimestampMillisecondType>(), 1_000_000)
            }
            TimeUnit::Microsecond => {
                timestamps(py, a.as_primitive::<TimestampMicrosecondType>(), 1_000)
            }
            TimeUnit::Nanosecond => timestamps(py, a.as_primitive::<TimestampNanosecondType>(), 1),
        },
        DataType::List(_) => {
            let l = a.as_list::<i32>();
            // The rows' values made Python objects at once, each row's list a
            // slice of them: a list per row made of its own Arrow slice was
            // most of the time reading `time_profile` (thousands of
            // connections, five list columns).
            let offsets = l.value_offsets();
            let first = offsets.first().map_or(0, |&o| o as usize);
            let last = offsets.last().map_or(0, |&o| o as usize);
            let values = to_list(py, l.values().slice(first, last - first).as_ref())?;
            let items = (0..l.len())
                .map(|i| {
                    if l.is_null(i) {
                        py.None().into_bound(py)
                    } else {
                        let (s, e) = (offsets[i] as usize - first, offsets[i + 1] as usize - first);
                        values.get_slice(s, e).into_any()
                    }
                })
                .collect::<Vec<_>>();
            PyList::new(py, items)
        }
        DataType::Null => PyList::new(py, (0..a.len()).map(|_| py.None())),
        other => Err(PyTypeError::new_err(format!(
            "column type {other} has no plain Python form (use the Arrow table)"
        ))),
    }
}
