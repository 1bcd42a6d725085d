//! A scan's `filter`, from the REST spec's expression JSON to iceberg-rust's `Predicate`.
//!
//! Pure: the JSON and the schema the filter is bound to go in, a predicate or a message for
//! the client's 400 comes out. iceberg-rust's own serde form of `Predicate` is not the
//! REST one (`{"type": "eq", "term": "id", "value": 5}`), hence this translation.
//!
//! Literals are typed by the column they are compared with, as Java's `SingleValueParser`
//! reads them: a date may come as `"2024-01-31"` or as days, a timestamp as ISO text or
//! as microseconds, binary and fixed as upper-case hex.
//!
//! Transform terms (`{"type": "transform", "transform": "day", "term": "ts"}`) are checked
//! (the transform, its column, the literal against the transform's result type), then
//! rewritten as predicates on their column where a transform allows (`transformed.rs`:
//! year, month, day, hour, truncate). iceberg-rust's predicates take column references
//! only, so a comparison that cannot be rewritten (bucket, void) becomes whatever keeps
//! every file where it stands: `true`, or `false` under an odd number of `not`s (so that
//! the `not` makes it `true`). `and` and `or` only widen with a wider operand, so the scan
//! keeps a superset of the matching files; the plan then leaves out those whose partition
//! values rule the filter out (`residual.rs`), and the residual (the filter itself,
//! transform terms included) leaves the rows to the client.
//!
//! A scan's predicate ([`scan_predicate`]) keeps every file the same way for comparisons
//! of a column whose type was promoted (another of the table's schemas types it
//! otherwise): older manifests hold bounds of the older type, which iceberg-rust cannot
//! compare with the literal. And its filter has a size limit ([`MAX_FILTER_VALUES`],
//! [`MAX_FILTER_EXPRESSIONS`]): every planned file carries a copy.

use std::collections::HashSet;

use iceberg::expr::{Predicate, Reference};
use iceberg::spec::{Datum, PrimitiveType, Schema, SchemaRef, Transform, Type};
use serde_json::Value;

use super::transformed::TransformTerm;
use crate::catalog::temporal;

/// Most literal values a scan's filter may hold in all (each value of an `in` or `not-in`
/// list counts). Every task of a plan carries what is left of the filter as its residual,
/// and iceberg-rust copies the bound filter into each file it plans, so a filter's size
/// is paid once per file: past this, a 400.
pub const MAX_FILTER_VALUES: usize = 10_000;

/// Most expressions (`and`, `or`, `not`, and each comparison) a scan's filter may hold:
/// past this, a 400.
pub const MAX_FILTER_EXPRESSIONS: usize = 1_000;

/// The schemas a filter meets: its names are resolved in `names`, its predicate is bound
/// to `bound`, and the comparisons of `promoted` columns prune nothing.
struct Columns<'a> {
    names: &'a Schema,
    bound: &'a Schema,
    promoted: &'a HashSet<i32>,
}

impl Columns<'_> {
    /// A column of `names` that `bound` does not have (added since the scanned snapshot):
    /// its files hold no value of it to prune by.
    fn absent(&self, id: i32) -> bool {
        self.bound.field_by_id(id).is_none()
    }
}

/// Translates a REST filter into a predicate over `schema`'s columns.
pub fn predicate(
    filter: &Value,
    schema: &Schema,
    case_sensitive: bool,
) -> Result<Predicate, String> {
    let columns = Columns {
        names: schema,
        bound: schema,
        promoted: &HashSet::new(),
    };
    translate(filter, &columns, case_sensitive, false)
}

/// Translates a scan's filter into the predicate its scan prunes with: [`predicate`],
/// once the filter's size is checked ([`check_size`]), and with the comparisons of
/// `promoted` columns ([`promoted_columns`]) keeping every file where they stand.
///
/// iceberg-rust reads a manifest's bounds and partition values with the schema written in
/// that manifest, and compares them with literals of `schema`'s types: a manifest written
/// before `id` became a long holds int bounds, a comparison of an int with a long has no
/// answer, and the file would be pruned. The residuals keep those comparisons, for the
/// client to apply. Null and NaN checks of the column compare no values and still prune.
///
/// The filter's names are those of `names` (the table's current schema, unless the
/// request asks for the snapshot's: `use-snapshot-schema`), and the predicate is bound to
/// `bound` (the scanned snapshot's, as iceberg-rust's scan binds it) through the columns'
/// field ids: a renamed column is found under its new name, and a column the snapshot
/// does not have (added since, or dropped and added again under its old name) prunes
/// nothing.
pub fn scan_predicate(
    filter: &Value,
    names: &Schema,
    bound: &Schema,
    promoted: &HashSet<i32>,
    case_sensitive: bool,
) -> Result<Predicate, String> {
    check_size(filter)?;
    let columns = Columns {
        names,
        bound,
        promoted,
    };
    translate(filter, &columns, case_sensitive, false)
}

/// The field ids of `schema`'s columns that another of the table's `schemas` types
/// otherwise (a type promoted since, or before: int to long, float to double, a wider
/// decimal), whose files' bounds may be of either type.
pub fn promoted_columns<'a>(
    schema: &Schema,
    schemas: impl IntoIterator<Item = &'a SchemaRef>,
) -> HashSet<i32> {
    let mut promoted = HashSet::new();
    for other in schemas {
        for (id, field) in schema.field_id_to_fields() {
            if other
                .field_by_id(*id)
                .is_some_and(|was| was.field_type != field.field_type)
            {
                promoted.insert(*id);
            }
        }
    }
    promoted
}

/// Refuses a filter of more than [`MAX_FILTER_EXPRESSIONS`] expressions or
/// [`MAX_FILTER_VALUES`] literal values, before anything is made of it.
pub fn check_size(filter: &Value) -> Result<(), String> {
    let (mut expressions, mut values) = (0usize, 0usize);
    let mut pending = vec![filter];
    while let Some(expression) = pending.pop() {
        expressions += 1;
        if expression.get("value").is_some() {
            values += 1;
        }
        if let Some(Value::Array(list)) = expression.get("values") {
            values += list.len();
        }
        if expressions > MAX_FILTER_EXPRESSIONS {
            return Err(format!(
                "A filter may hold at most {MAX_FILTER_EXPRESSIONS} expressions \
                 (and, or, not, comparisons); this one holds more"
            ));
        }
        if values > MAX_FILTER_VALUES {
            return Err(format!(
                "A filter may hold at most {MAX_FILTER_VALUES} literal values in all \
                 (each value of an in list counts); this one holds at least {values}"
            ));
        }
        for key in ["left", "right", "child"] {
            if let Some(child) = expression.get(key) {
                pending.push(child);
            }
        }
    }
    Ok(())
}

/// Java's `ExpressionParser` writes `alwaysTrue()` and `alwaysFalse()` as bare JSON
/// booleans (its scan-planning client sends `"filter": true` for an unfiltered scan);
/// the spec's form is `{"type": "true"}`. A request's filter is put in the spec's form
/// once, as it is read, so everything after it (the predicate, the residuals, a plan
/// task's copy) sees one form.
pub fn spec_form(filter: Value) -> Value {
    match filter {
        Value::Bool(true) => serde_json::json!({"type": "true"}),
        Value::Bool(false) => serde_json::json!({"type": "false"}),
        Value::Object(mut object) => {
            for key in ["left", "right", "child"] {
                if let Some(child) = object.get_mut(key) {
                    *child = spec_form(std::mem::take(child));
                }
            }
            Value::Object(object)
        }
        other => other,
    }
}

/// Reads a request's `filter` in the spec's form ([`spec_form`]).
pub fn deserialize<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Value>, D::Error> {
    use serde::Deserialize;
    Ok(Option::<Value>::deserialize(deserializer)?.map(spec_form))
}

/// What a comparison compares: a column, or a transform of one; each with the column's
/// field id.
enum Term {
    Column(Reference, i32, PrimitiveType),
    /// With the transform's result type, which the literal must have.
    Transformed(TransformTerm, i32, PrimitiveType),
}

/// `negated`: whether an odd number of `not`s encloses `filter`. The comparisons of
/// promoted or absent columns keep every file (see [`scan_predicate`]).
fn translate(
    filter: &Value,
    columns: &Columns,
    case_sensitive: bool,
    negated: bool,
) -> Result<Predicate, String> {
    let object = filter
        .as_object()
        .ok_or_else(|| format!("A filter expression must be an object, not {filter}"))?;
    let kind = match object.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        _ => return Err(format!("A filter expression needs a string type: {filter}")),
    };
    let child = |name: &str, negated: bool| -> Result<Predicate, String> {
        let value = object
            .get(name)
            .ok_or_else(|| format!("A {kind} expression needs {name}"))?;
        translate(value, columns, case_sensitive, negated)
    };
    let prunes_nothing = |id: i32| columns.promoted.contains(&id) || columns.absent(id);
    // What keeps every file where it stands, once the enclosing `not`s apply.
    let every_file = if negated {
        Predicate::AlwaysFalse
    } else {
        Predicate::AlwaysTrue
    };
    // A transform term's comparison: rewritten on its column, or else (a transform that
    // has no rewrite, a promoted column) keeps every file.
    let through = |term: &TransformTerm, id: i32, values: &[Datum]| {
        if prunes_nothing(id) {
            return every_file.clone();
        }
        term.rewrite(kind, values, negated)
            .unwrap_or_else(|| every_file.clone())
    };
    let term = || term(object.get("term"), columns, case_sensitive);
    match kind {
        "true" => Ok(Predicate::AlwaysTrue),
        "false" => Ok(Predicate::AlwaysFalse),
        "and" => Ok(child("left", negated)?.and(child("right", negated)?)),
        "or" => Ok(child("left", negated)?.or(child("right", negated)?)),
        "not" => Ok(child("child", !negated)?.negate()),
        // No values compared: these prune promoted columns too (not absent ones).
        "is-null" | "not-null" | "is-nan" | "not-nan" => {
            let reference = match term()? {
                Term::Column(_, id, _) if columns.absent(id) => return Ok(every_file.clone()),
                Term::Column(reference, _, _) => reference,
                Term::Transformed(term, id, _) => return Ok(through(&term, id, &[])),
            };
            Ok(match kind {
                "is-null" => reference.is_null(),
                "not-null" => reference.is_not_null(),
                "is-nan" => reference.is_nan(),
                _ => reference.is_not_nan(),
            })
        }
        "lt" | "lt-eq" | "gt" | "gt-eq" | "eq" | "not-eq" | "starts-with" | "not-starts-with" => {
            let value = object
                .get("value")
                .ok_or_else(|| format!("A {kind} expression needs a value"))?;
            let (reference, id, ty) = match term()? {
                Term::Column(reference, id, ty) => (reference, id, ty),
                Term::Transformed(term, id, ty) => {
                    let value = datum(value, &ty).map_err(|e| format!("{e} (transform term)"))?;
                    return Ok(through(&term, id, &[value]));
                }
            };
            let datum =
                datum(value, &ty).map_err(|e| format!("{e} (column {})", reference.name()))?;
            // iceberg-rust projects a prefix onto a `truncate` partition by comparing its
            // length in bytes with the width, which counts characters: with a non-ASCII
            // prefix it would prune matching files. Such a prefix prunes nothing, nor
            // does a comparison of a promoted column (checked, then left to residuals).
            let non_ascii_prefix =
                matches!(kind, "starts-with" | "not-starts-with") && !is_ascii_text(&datum);
            if non_ascii_prefix || prunes_nothing(id) {
                return Ok(every_file.clone());
            }
            Ok(match kind {
                "lt" => reference.less_than(datum),
                "lt-eq" => reference.less_than_or_equal_to(datum),
                "gt" => reference.greater_than(datum),
                "gt-eq" => reference.greater_than_or_equal_to(datum),
                "eq" => reference.equal_to(datum),
                "not-eq" => reference.not_equal_to(datum),
                "starts-with" => reference.starts_with(datum),
                _ => reference.not_starts_with(datum),
            })
        }
        "in" | "not-in" => {
            let values = match object.get("values") {
                Some(Value::Array(values)) => values,
                _ => return Err(format!("An {kind} expression needs a values array")),
            };
            let (reference, id, ty) = match term()? {
                Term::Column(reference, id, ty) => (reference, id, ty),
                Term::Transformed(term, id, ty) => {
                    let datums = values
                        .iter()
                        .map(|v| datum(v, &ty))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| format!("{e} (transform term)"))?;
                    return Ok(through(&term, id, &datums));
                }
            };
            let datums = values
                .iter()
                .map(|v| datum(v, &ty))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("{e} (column {})", reference.name()))?;
            if prunes_nothing(id) {
                return Ok(every_file.clone());
            }
            Ok(if kind == "in" {
                reference.is_in(datums)
            } else {
                reference.is_not_in(datums)
            })
        }
        other => Err(format!("Unknown filter expression type {other:?}")),
    }
}

/// Whether a literal is text of ASCII characters only (a byte per character).
pub(super) fn is_ascii_text(datum: &Datum) -> bool {
    match datum.literal() {
        iceberg::spec::PrimitiveLiteral::String(s) => s.is_ascii(),
        _ => false,
    }
}

/// What a term names: a column (a name) or a transform of one (an object).
fn term(term: Option<&Value>, columns: &Columns, case_sensitive: bool) -> Result<Term, String> {
    let Some(Value::Object(o)) = term else {
        let (reference, id, ty) = column(term, columns, case_sensitive)?;
        return Ok(Term::Column(reference, id, ty));
    };
    if o.get("type").and_then(Value::as_str) != Some("transform") {
        return Err(format!(
            "A filter term must be a column name or a transform term, not {}",
            Value::Object(o.clone())
        ));
    }
    let transform = match o.get("transform") {
        Some(Value::String(text)) => text
            .parse::<Transform>()
            .map_err(|e| format!("Unknown transform {text:?}: {}", e.message()))?,
        _ => return Err("A transform term needs a transform (such as \"day\")".into()),
    };
    if matches!(transform, Transform::Bucket(0) | Transform::Truncate(0)) {
        return Err(format!("Transform {transform} needs a positive width"));
    }
    let (reference, id, source) = column(o.get("term"), columns, case_sensitive)?;
    match transform.result_type(&Type::Primitive(source.clone())) {
        // identity(c) is c.
        Ok(Type::Primitive(_)) if transform == Transform::Identity => {
            Ok(Term::Column(reference, id, source))
        }
        Ok(Type::Primitive(ty)) => Ok(Term::Transformed(
            TransformTerm {
                column: reference,
                column_type: source,
                transform,
            },
            id,
            ty,
        )),
        Ok(other) => Err(format!("Transform {transform} gives a {other}")),
        Err(e) => Err(format!(
            "Transform {transform} does not apply to column {}: {}",
            reference.name(),
            e.message()
        )),
    }
}

/// The column a term names in `columns.names`, its field id and its type there; only
/// primitive columns can be compared. The reference is by the column's name in
/// `columns.bound` (its own where the bound schema does not have it: then it is never
/// bound, its comparisons pruning nothing).
fn column(
    term: Option<&Value>,
    columns: &Columns,
    case_sensitive: bool,
) -> Result<(Reference, i32, PrimitiveType), String> {
    let schema = columns.names;
    let name = match term {
        Some(Value::String(name)) => name,
        Some(other) => return Err(format!("A filter term must be a column name, not {other}")),
        None => return Err("A filter expression needs a term".into()),
    };
    let field = if case_sensitive {
        schema.field_by_name(name)
    } else {
        schema.field_by_name_case_insensitive(name)
    }
    .ok_or_else(|| format!("Cannot find field '{name}' in the table's schema"))?;
    match field.field_type.as_ref() {
        // The predicate keeps the bound schema's spelling, so that binding finds it
        // whatever the case sensitivity.
        Type::Primitive(ty) => {
            let name = (columns.bound.name_by_field_id(field.id))
                .or_else(|| schema.name_by_field_id(field.id))
                .unwrap_or(&field.name);
            Ok((Reference::new(name), field.id, ty.clone()))
        }
        other => Err(format!(
            "Column {name} is a {other}, not a primitive column"
        )),
    }
}

/// A JSON literal as a value of the column's type.
pub(super) fn datum(value: &Value, ty: &PrimitiveType) -> Result<Datum, String> {
    let wrong = || format!("{value} is not a valid {ty} value");
    let bad = |e: iceberg::Error| format!("{value} is not a valid {ty} value: {}", e.message());
    let int = || value.as_i64().ok_or_else(wrong);
    let text = || value.as_str().ok_or_else(wrong);
    let hex = || -> Result<Vec<u8>, String> {
        let s = text()?;
        // Two bytes at a time: only ASCII text can be hex (and sliced so).
        if s.len() % 2 != 0 || !s.is_ascii() {
            return Err(wrong());
        }
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| wrong()))
            .collect()
    };
    Ok(match ty {
        PrimitiveType::Boolean => Datum::bool(value.as_bool().ok_or_else(wrong)?),
        PrimitiveType::Int => Datum::int(i32::try_from(int()?).map_err(|_| wrong())?),
        PrimitiveType::Long => Datum::long(int()?),
        PrimitiveType::Float => Datum::float(value.as_f64().ok_or_else(wrong)? as f32),
        PrimitiveType::Double => Datum::double(value.as_f64().ok_or_else(wrong)?),
        PrimitiveType::Decimal { .. } => {
            let digits = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err(wrong()),
            };
            Datum::decimal_from_str(digits)
                .and_then(|d| d.to(&Type::Primitive(ty.clone())))
                .map_err(bad)?
        }
        PrimitiveType::Date => match value {
            Value::String(s) => Datum::date_from_str(s).map_err(bad)?,
            // Days as a calendar can hold them (iceberg-rust's projections turn them
            // into dates and panic past that, about ±262,000 years).
            _ => Datum::date(
                i32::try_from(int()?)
                    .ok()
                    .filter(|&days| temporal::date(days).is_some())
                    .ok_or_else(wrong)?,
            ),
        },
        PrimitiveType::Time => match value {
            Value::String(s) => Datum::time_from_str(s).map_err(bad)?,
            _ => Datum::time_micros(int()?).map_err(bad)?,
        },
        PrimitiveType::Timestamp => match value {
            Value::String(s) => Datum::timestamp_from_str(s).map_err(bad)?,
            _ => Datum::timestamp_micros(in_range(int()?).ok_or_else(wrong)?),
        },
        PrimitiveType::Timestamptz => match value {
            Value::String(s) => Datum::timestamptz_from_str(s).map_err(bad)?,
            _ => Datum::timestamptz_micros(in_range(int()?).ok_or_else(wrong)?),
        },
        PrimitiveType::TimestampNs => Datum::timestamp_nanos(int()?),
        PrimitiveType::TimestamptzNs => Datum::timestamptz_nanos(int()?),
        PrimitiveType::String => Datum::string(text()?),
        PrimitiveType::Uuid => Datum::uuid_from_str(text()?).map_err(bad)?,
        PrimitiveType::Fixed(_) => Datum::fixed(hex()?),
        PrimitiveType::Binary => Datum::binary(hex()?),
    })
}

/// `micros` from the epoch, if it is an instant a calendar holds.
fn in_range(micros: i64) -> Option<i64> {
    temporal::instant(micros).map(|_| micros)
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{NestedField, Schema};
    use serde_json::json;
    use std::sync::Arc;

    fn schema() -> Schema {
        Schema::builder()
            .with_fields(vec![
                Arc::new(NestedField::required(
                    1,
                    "id",
                    Type::Primitive(PrimitiveType::Long),
                )),
                Arc::new(NestedField::optional(
                    2,
                    "day",
                    Type::Primitive(PrimitiveType::Date),
                )),
                Arc::new(NestedField::optional(
                    3,
                    "Name",
                    Type::Primitive(PrimitiveType::String),
                )),
                Arc::new(NestedField::optional(
                    4,
                    "small",
                    Type::Primitive(PrimitiveType::Int),
                )),
            ])
            .build()
            .unwrap()
    }

    fn parse(filter: Value) -> Result<String, String> {
        predicate(&filter, &schema(), true).map(|p| p.to_string())
    }

    #[test]
    fn comparisons_and_logic() {
        let p = parse(json!({"type": "and",
            "left": {"type": "gt-eq", "term": "id", "value": 10},
            "right": {"type": "not", "child": {"type": "eq", "term": "day", "value": "2024-01-31"}}}))
        .unwrap();
        assert!(p.contains("id >= 10"), "{p}");
        assert!(p.contains("day"), "{p}");
        assert_eq!(parse(json!({"type": "true"})).unwrap(), "TRUE");
        let p = parse(json!({"type": "in", "term": "small", "values": [1, 2]})).unwrap();
        assert!(p.contains("small IN"), "{p}");
        assert!(parse(json!({"type": "is-null", "term": "Name"}))
            .unwrap()
            .contains("IS NULL"));
    }

    #[test]
    fn java_booleans_are_read_in_the_spec_form() {
        assert_eq!(spec_form(json!(true)), json!({"type": "true"}));
        assert_eq!(spec_form(json!(false)), json!({"type": "false"}));
        let nested = spec_form(json!({"type": "or", "left": false,
            "right": {"type": "not", "child": true}}));
        assert_eq!(
            nested,
            json!({"type": "or", "left": {"type": "false"},
                "right": {"type": "not", "child": {"type": "true"}}})
        );
        // Only where an expression stands: a literal `true` stays a literal.
        let literal = json!({"type": "eq", "term": "flag", "value": true});
        assert_eq!(spec_form(literal.clone()), literal);
        let request: super::super::ScanRequest =
            serde_json::from_value(json!({"filter": true})).unwrap();
        assert_eq!(request.filter, Some(json!({"type": "true"})));
        assert_eq!(parse(spec_form(json!(false))).unwrap(), "FALSE");
    }
    #[test]
    fn days_as_numbers_and_text_agree() {
        assert_eq!(
            parse(json!({"type": "eq", "term": "day", "value": 19753})),
            parse(json!({"type": "eq", "term": "day", "value": "2024-01-31"}))
        );
    }

    #[test]
    fn case_insensitive_names_take_the_schema_spelling() {
        let p = predicate(
            &json!({"type": "eq", "term": "name", "value": "x"}),
            &schema(),
            false,
        );
        assert!(p.unwrap().to_string().contains("Name"));
        let e = parse(json!({"type": "eq", "term": "name", "value": "x"})).unwrap_err();
        assert!(e.contains("Cannot find field 'name'"), "{e}");
    }

    #[test]
    fn transform_terms_become_column_ranges_or_keep_every_file() {
        let day = |value: Value| {
            json!({"type": "eq", "value": value,
            "term": {"type": "transform", "transform": "day", "term": "day"}})
        };
        let not = |child: Value| json!({"type": "not", "child": child});
        let id = json!({"type": "gt", "term": "id", "value": 5});
        let p = parse(day(json!("2024-01-31"))).unwrap();
        assert!(
            p.contains("day >= 2024-01-31") && p.contains("day < 2024-02-01"),
            "{p}"
        );
        assert_eq!(p, parse(day(json!(19753))).unwrap());
        // Under a `not`, rows with a null day are kept.
        let p = parse(not(day(json!(19753)))).unwrap();
        assert!(
            p.contains("day < 2024-01-31") && p.contains("IS NULL"),
            "{p}"
        );
        // identity(c) is c.
        let identity = json!({"type": "gt", "value": 5,
            "term": {"type": "transform", "transform": "identity", "term": "id"}});
        assert_eq!(parse(identity).unwrap(), parse(id.clone()).unwrap());

        // A bucket keeps every file, under any number of `not`s.
        let bucket = |value: i64| {
            json!({"type": "eq", "value": value,
            "term": {"type": "transform", "transform": "bucket[4]", "term": "id"}})
        };
        assert_eq!(parse(bucket(1)).unwrap(), "TRUE");
        assert_eq!(parse(not(bucket(1))).unwrap(), "TRUE");
        assert_eq!(parse(not(not(bucket(1)))).unwrap(), "TRUE");
        // The column's own comparison still prunes beside it.
        let both = json!({"type": "and", "left": id, "right": not(bucket(1))});
        assert_eq!(parse(both).unwrap(), parse(id.clone()).unwrap());
        let either = not(json!({"type": "or", "left": id, "right": bucket(1)}));
        assert_eq!(parse(either).unwrap(), parse(not(id.clone())).unwrap());
        let among = json!({"type": "in", "values": [0, 3],
            "term": {"type": "transform", "transform": "bucket[4]", "term": "id"}});
        assert_eq!(parse(among).unwrap(), "TRUE");
        // A non-ASCII prefix prunes nothing (iceberg-rust would count its bytes).
        let prefix = |value: &str| json!({"type": "starts-with", "term": "Name", "value": value});
        assert!(parse(prefix("ab")).unwrap().contains("STARTS WITH"));
        assert_eq!(parse(prefix("éab")).unwrap(), "TRUE");
        assert_eq!(parse(not(prefix("éab"))).unwrap(), "TRUE");
    }

    /// A promoted column's comparisons keep every file, `not`s or none, and leave the
    /// others to prune; its literals are still checked, and null checks still prune.
    #[test]
    fn promoted_columns_prune_nothing() {
        let old = Schema::builder()
            .with_fields(vec![Arc::new(NestedField::required(
                1,
                "id",
                Type::Primitive(PrimitiveType::Int),
            ))])
            .build()
            .unwrap();
        let schemas = [Arc::new(old), Arc::new(schema())];
        let promoted = promoted_columns(&schema(), schemas.iter());
        assert_eq!(promoted, HashSet::from([1]));
        let scan = |filter: Value| {
            scan_predicate(&filter, &schema(), &schema(), &promoted, true).map(|p| p.to_string())
        };
        let not = |child: Value| json!({"type": "not", "child": child});
        let gt = json!({"type": "gt", "term": "id", "value": 5});
        assert_eq!(scan(gt.clone()).unwrap(), "TRUE");
        assert_eq!(scan(not(gt.clone())).unwrap(), "TRUE");
        let among = json!({"type": "in", "term": "id", "values": [1, 2]});
        assert_eq!(scan(not(among)).unwrap(), "TRUE");
        let truncated = json!({"type": "eq", "value": 10,
            "term": {"type": "transform", "transform": "truncate[10]", "term": "id"}});
        assert_eq!(scan(truncated).unwrap(), "TRUE");
        let small = json!({"type": "gt", "term": "small", "value": 5});
        let both = json!({"type": "and", "left": gt, "right": small.clone()});
        assert_eq!(scan(both).unwrap(), parse(small).unwrap());
        assert!(scan(json!({"type": "is-null", "term": "id"}))
            .unwrap()
            .contains("IS NULL"));
        let e = scan(json!({"type": "gt", "term": "id", "value": "x"})).unwrap_err();
        assert!(e.contains("not a valid long"), "{e}");
        // Without promotion, as before.
        let none = HashSet::new();
        let p = scan_predicate(
            &json!({"type": "gt", "term": "id", "value": 5}),
            &schema(),
            &schema(),
            &none,
            true,
        );
        assert!(p.unwrap().to_string().contains("id > 5"));
    }

    /// Names are the current schema's, bound by field id to the scanned snapshot's: a
    /// renamed column is found under its new name and bound under its old one; a column
    /// the snapshot does not have prunes nothing, null checks included; a column dropped
    /// and added again under its old name is the new one.
    #[test]
    fn names_of_the_current_schema_bind_to_the_snapshots_columns() {
        let snapshot = schema();
        let current = Schema::builder()
            .with_fields(vec![
                Arc::new(NestedField::required(
                    1,
                    "key",
                    Type::Primitive(PrimitiveType::Long),
                )),
                Arc::new(NestedField::optional(
                    5,
                    "small",
                    Type::Primitive(PrimitiveType::String),
                )),
                Arc::new(NestedField::optional(
                    6,
                    "added",
                    Type::Primitive(PrimitiveType::Int),
                )),
            ])
            .build()
            .unwrap();
        let none = HashSet::new();
        let scan = |filter: Value| {
            scan_predicate(&filter, &current, &snapshot, &none, true).map(|p| p.to_string())
        };
        assert_eq!(
            scan(json!({"type": "gt", "term": "key", "value": 5})).unwrap(),
            "id > 5"
        );
        let not = |child: Value| json!({"type": "not", "child": child});
        for added in [
            json!({"type": "eq", "term": "added", "value": 1}),
            json!({"type": "is-null", "term": "added"}),
            json!({"type": "in", "term": "added", "values": [1, 2]}),
        ] {
            assert_eq!(scan(added.clone()).unwrap(), "TRUE", "{added}");
            assert_eq!(scan(not(added.clone())).unwrap(), "TRUE", "{added}");
        }
        // `small` is now a string column of its own (id 5): a string literal is right,
        // and it prunes nothing; the snapshot's int `small` is not what it names.
        assert_eq!(
            scan(json!({"type": "eq", "term": "small", "value": "x"})).unwrap(),
            "TRUE"
        );
        let e = scan(json!({"type": "eq", "term": "id", "value": 1})).unwrap_err();
        assert!(e.contains("Cannot find field 'id'"), "{e}");
    }

    #[test]
    fn filters_past_the_limits_are_refused() {
        let values = |n: usize| json!({"type": "in", "term": "id", "values": vec![1; n]});
        check_size(&values(MAX_FILTER_VALUES)).unwrap();
        let e = check_size(&values(MAX_FILTER_VALUES + 1)).unwrap_err();
        assert!(e.contains("at most 10000 literal values"), "{e}");
        // Counted across the expression.
        let two = json!({"type": "or", "left": values(MAX_FILTER_VALUES),
            "right": {"type": "eq", "term": "id", "value": 1}});
        assert!(check_size(&two).is_err());
        let e = scan_predicate(&two, &schema(), &schema(), &HashSet::new(), true).unwrap_err();
        assert!(e.contains("literal values"), "{e}");
        let mut deep = json!({"type": "true"});
        for _ in 1..MAX_FILTER_EXPRESSIONS {
            deep = json!({"type": "not", "child": deep});
        }
        check_size(&deep).unwrap();
        let deeper = json!({"type": "not", "child": deep});
        let e = check_size(&deeper).unwrap_err();
        assert!(e.contains("at most 1000 expressions"), "{e}");
    }

    #[test]
    fn binary_literals_are_ascii_hex() {
        assert_eq!(
            datum(&json!("0AFF"), &PrimitiveType::Binary).unwrap(),
            Datum::binary(vec![0x0a, 0xff])
        );
        // Not sliced mid-character: refused.
        assert!(datum(&json!("aéb"), &PrimitiveType::Binary).is_err());
        assert!(datum(&json!("0G"), &PrimitiveType::Binary).is_err());
    }

    /// Dates and instants past what a calendar holds are refused, not handed to the
    /// projections that would panic on them; the edges of the range still parse.
    #[test]
    fn temporal_literals_past_a_calendar_are_refused() {
        for days in [i32::MAX, i32::MIN] {
            let error = datum(&json!(days), &PrimitiveType::Date).unwrap_err();
            assert!(error.contains("not a valid date"), "{error}");
        }
        assert_eq!(
            datum(&json!(-1), &PrimitiveType::Date).unwrap(),
            Datum::date(-1)
        );
        for ty in [PrimitiveType::Timestamp, PrimitiveType::Timestamptz] {
            assert!(datum(&json!(i64::MAX), &ty).is_err());
            assert!(datum(&json!(i64::MIN), &ty).is_err());
            assert!(datum(&json!(-1_500_000), &ty).is_ok());
        }
    }

    #[test]
    fn bad_filters_say_why() {
        for (filter, wanted) in [
            (json!([]), "must be an object"),
            (
                json!({"type": "between", "term": "id"}),
                "Unknown filter expression type",
            ),
            (json!({"type": "eq", "term": "id"}), "needs a value"),
            (
                json!({"type": "eq", "term": "id", "value": "ten"}),
                "not a valid long",
            ),
            (
                json!({"type": "eq", "term": "small", "value": 5_000_000_000i64}),
                "not a valid int",
            ),
            (
                json!({"type": "lt", "term": {"type": "transform", "transform": "hour", "term": "day"}, "value": 1}),
                "does not apply to column day",
            ),
            (
                json!({"type": "lt", "term": {"type": "transform", "transform": "spin[3]", "term": "id"}, "value": 1}),
                "Unknown transform",
            ),
            (
                json!({"type": "eq", "term": {"type": "transform", "transform": "bucket[4]", "term": "nope"}, "value": 1}),
                "Cannot find field 'nope'",
            ),
            (
                json!({"type": "in", "term": {"type": "transform", "transform": "bucket[4]", "term": "id"}, "values": ["x"]}),
                "not a valid int",
            ),
            (
                json!({"type": "eq", "term": {"type": "reference", "term": "id"}, "value": 1}),
                "a column name or a transform term",
            ),
            (
                json!({"type": "and", "left": {"type": "true"}}),
                "needs right",
            ),
            (
                json!({"type": "in", "term": "id", "values": 3}),
                "values array",
            ),
            (
                json!({"type": "eq", "term": "day", "value": "yesterday"}),
                "not a valid date",
            ),
            (
                json!({"type": "eq", "term": {"type": "transform", "transform": "truncate[0]", "term": "id"}, "value": 5}),
                "positive width",
            ),
            (
                json!({"type": "eq", "term": {"type": "transform", "transform": "bucket[0]", "term": "id"}, "value": 5}),
                "positive width",
            ),
        ] {
            let e = parse(filter.clone()).unwrap_err();
            assert!(e.contains(wanted), "{filter}: {e}");
        }
    }
}
