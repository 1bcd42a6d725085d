//! Data and delete files as the REST spec's `ContentFile` JSON.
//!
//! Pure. Partition values and bounds use Iceberg's single-value JSON serialization (dates
//! as `"2024-01-31"`, decimals as text, binary as upper-case hex), which is what the Java
//! client's `ContentFileParser` reads back with the partition spec's types. Column
//! statistics are sent only for the fields a client asked for (`stats-fields`): they are
//! most of a file's size on the wire.

use std::collections::{HashMap, HashSet};

use iceberg::spec::{DataContentType, DataFile, Datum, Literal, StructType, Type};
use serde_json::{json, Map, Value};

use crate::catalog::temporal;

/// Upper-case hex, the spec's form of binary values.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

fn content(kind: DataContentType) -> &'static str {
    match kind {
        DataContentType::Data => "data",
        DataContentType::PositionDeletes => "position-deletes",
        DataContentType::EqualityDeletes => "equality-deletes",
    }
}

/// A datum in the spec's single-value JSON form.
fn datum_json(datum: &Datum) -> Value {
    let ty = Type::Primitive(datum.data_type().clone());
    value_json(&Literal::Primitive(datum.literal().clone()), &ty).unwrap_or(Value::Null)
}

/// A value in the spec's single-value JSON form (`None`: it has none, e.g. a date past
/// what a calendar holds). Temporal values are written here: iceberg-rust's conversion
/// panics on an instant before 1970 with a fraction of a second (its `timestamptz`
/// forms), on a time outside a day and on a date or instant past a calendar's range,
/// all of which other engines' files may hold. The same text as iceberg-rust's otherwise.
pub(super) fn value_json(literal: &Literal, ty: &Type) -> Option<Value> {
    use chrono::DateTime;
    use iceberg::spec::{PrimitiveLiteral as L, PrimitiveType as T};
    const DATETIME: &str = "%Y-%m-%dT%H:%M:%S%.f";
    const DATETIME_UTC: &str = "%Y-%m-%dT%H:%M:%S%.f+00:00";
    let (Type::Primitive(primitive), Literal::Primitive(value)) = (ty, literal) else {
        return literal.clone().try_into_json(ty).ok();
    };
    let text = match (primitive, value) {
        (T::Date, L::Int(days)) => temporal::date(*days).map(|date| date.to_string()),
        (T::Time, L::Long(micros)) => temporal::time(*micros).map(|time| time.to_string()),
        (T::Timestamp, L::Long(micros)) => {
            temporal::instant(*micros).map(|at| at.naive_utc().format(DATETIME).to_string())
        }
        (T::Timestamptz, L::Long(micros)) => {
            temporal::instant(*micros).map(|at| at.format(DATETIME_UTC).to_string())
        }
        (T::TimestampNs, L::Long(nanos)) => Some(
            (DateTime::from_timestamp_nanos(*nanos).naive_utc())
                .format(DATETIME)
                .to_string(),
        ),
        (T::TimestamptzNs, L::Long(nanos)) => Some(
            DateTime::from_timestamp_nanos(*nanos)
                .format(DATETIME_UTC)
                .to_string(),
        ),
        _ => return literal.clone().try_into_json(ty).ok(),
    };
    text.map(Value::String)
}

/// `{"keys": [...], "values": [...]}` over the kept field ids, keys ascending.
fn id_map<T>(map: &HashMap<i32, T>, keep: &HashSet<i32>, value: impl Fn(&T) -> Value) -> Value {
    let mut ids: Vec<i32> = map.keys().copied().filter(|id| keep.contains(id)).collect();
    ids.sort_unstable();
    let values: Vec<Value> = ids.iter().map(|id| value(&map[id])).collect();
    json!({ "keys": ids, "values": values })
}

/// One file as a `ContentFile` (a `DataFile`, `PositionDeleteFile` or
/// `EqualityDeleteFile`). `partition_type` is the type of the file's partition spec;
/// `stats` the field ids whose statistics the client asked for.
pub fn content_file(
    file: &DataFile,
    spec_id: i32,
    partition_type: &StructType,
    stats: &HashSet<i32>,
) -> Value {
    let partition: Vec<Value> = file
        .partition()
        .iter()
        .zip(partition_type.fields())
        .map(|(value, field)| match value {
            Some(literal) => value_json(literal, &field.field_type).unwrap_or(Value::Null),
            None => Value::Null,
        })
        .collect();
    let mut out = Map::new();
    out.insert("content".into(), content(file.content_type()).into());
    out.insert("file-path".into(), file.file_path().into());
    out.insert("file-format".into(), file.file_format().to_string().into());
    out.insert("spec-id".into(), spec_id.into());
    out.insert("partition".into(), partition.into());
    out.insert(
        "file-size-in-bytes".into(),
        file.file_size_in_bytes().into(),
    );
    out.insert("record-count".into(), file.record_count().into());
    if let Some(key) = file.key_metadata() {
        out.insert("key-metadata".into(), hex(key).into());
    }
    if let Some(offsets) = file.split_offsets().filter(|o| !o.is_empty()) {
        out.insert("split-offsets".into(), offsets.into());
    }
    if let Some(order) = file.sort_order_id() {
        out.insert("sort-order-id".into(), order.into());
    }
    match file.content_type() {
        DataContentType::Data => {
            if let Some(first) = file.first_row_id() {
                out.insert("first-row-id".into(), first.into());
            }
        }
        DataContentType::EqualityDeletes => {
            if let Some(ids) = file.equality_ids() {
                out.insert("equality-ids".into(), ids.into());
            }
        }
        DataContentType::PositionDeletes => {
            // Deletion vectors (v3): where in the Puffin file, and which data file.
            if let Some(offset) = file.content_offset() {
                out.insert("content-offset".into(), offset.into());
            }
            if let Some(size) = file.content_size_in_bytes() {
                out.insert("content-size-in-bytes".into(), size.into());
            }
            if let Some(referenced) = file.referenced_data_file() {
                out.insert("referenced-data-file".into(), referenced.into());
            }
        }
    }
    if !stats.is_empty() {
        let count = |n: &u64| Value::from(*n);
        out.insert(
            "column-sizes".into(),
            id_map(file.column_sizes(), stats, count),
        );
        out.insert(
            "value-counts".into(),
            id_map(file.value_counts(), stats, count),
        );
        out.insert(
            "null-value-counts".into(),
            id_map(file.null_value_counts(), stats, count),
        );
        out.insert(
            "nan-value-counts".into(),
            id_map(file.nan_value_counts(), stats, count),
        );
        out.insert(
            "lower-bounds".into(),
            id_map(file.lower_bounds(), stats, datum_json),
        );
        out.insert(
            "upper-bounds".into(),
            id_map(file.upper_bounds(), stats, datum_json),
        );
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{
        DataFileBuilder, DataFileFormat, NestedField, PrimitiveLiteral, PrimitiveType, Struct,
    };
    use std::sync::Arc;

    /// Temporal values as iceberg-rust writes them where it can, and where it would panic
    /// (before 1970 with a fraction of a second, past a calendar) written or left out.
    #[test]
    fn temporal_values_are_written_where_iceberg_rust_would_panic() {
        let long = |n| Literal::Primitive(PrimitiveLiteral::Long(n));
        let int = |n| Literal::Primitive(PrimitiveLiteral::Int(n));
        let ty = |t| Type::Primitive(t);
        // The same text as iceberg-rust's for the values it handles.
        for (value, t) in [
            (long(1_500_000), PrimitiveType::Timestamp),
            (long(1_500_000), PrimitiveType::Timestamptz),
            (long(1_700_000_000_123_456), PrimitiveType::Timestamptz),
            (long(-2_000_000), PrimitiveType::Timestamptz),
            (long(1_500_000_123), PrimitiveType::TimestampNs),
            (long(3_600_000_001), PrimitiveType::Time),
            (int(-1), PrimitiveType::Date),
            (int(19_753), PrimitiveType::Date),
        ] {
            let theirs = value.clone().try_into_json(&ty(t.clone())).unwrap();
            assert_eq!(value_json(&value, &ty(t)), Some(theirs));
        }
        // Where iceberg-rust's conversion panics.
        assert_eq!(
            value_json(&long(-500_000), &ty(PrimitiveType::Timestamptz)),
            Some(Value::from("1969-12-31T23:59:59.500+00:00"))
        );
        assert_eq!(
            value_json(&long(-1), &ty(PrimitiveType::TimestamptzNs)),
            Some(Value::from("1969-12-31T23:59:59.999999999+00:00"))
        );
        assert_eq!(value_json(&int(i32::MAX), &ty(PrimitiveType::Date)), None);
        assert_eq!(
            value_json(&long(i64::MAX), &ty(PrimitiveType::Timestamp)),
            None
        );
        assert_eq!(value_json(&long(-1), &ty(PrimitiveType::Time)), None);
    }

    #[test]
    fn a_data_file_in_the_specs_words() {
        let partition_type = StructType::new(vec![
            Arc::new(NestedField::optional(
                1000,
                "day",
                Type::Primitive(PrimitiveType::Date),
            )),
            Arc::new(NestedField::optional(
                1001,
                "kind",
                Type::Primitive(PrimitiveType::String),
            )),
        ]);
        let file = DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path("file:///wh/t/data/a.parquet".into())
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::from_iter([
                Some(Literal::Primitive(PrimitiveLiteral::Int(19753))),
                None,
            ]))
            .record_count(7)
            .file_size_in_bytes(1234)
            .value_counts(HashMap::from([(1, 7), (2, 7)]))
            .lower_bounds(HashMap::from([
                (1, Datum::long(3)),
                (2, Datum::string("a")),
            ]))
            .upper_bounds(HashMap::from([(1, Datum::long(9))]))
            .split_offsets(Some(vec![4]))
            .build()
            .unwrap();
        let none = HashSet::new();
        let json = content_file(&file, 2, &partition_type, &none);
        assert_eq!(
            json,
            json!({"content": "data", "file-path": "file:///wh/t/data/a.parquet",
                "file-format": "parquet", "spec-id": 2, "partition": ["2024-01-31", null],
                "file-size-in-bytes": 1234, "record-count": 7, "split-offsets": [4]})
        );
        let json = content_file(&file, 2, &partition_type, &HashSet::from([1]));
        assert_eq!(json["value-counts"], json!({"keys": [1], "values": [7]}));
        assert_eq!(json["lower-bounds"], json!({"keys": [1], "values": [3]}));
        assert_eq!(json["upper-bounds"], json!({"keys": [1], "values": [9]}));
        assert_eq!(json["column-sizes"], json!({"keys": [], "values": []}));
    }
}
