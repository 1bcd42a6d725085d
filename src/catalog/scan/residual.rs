//! Each file's residual filter: the scan's filter with what the file's identity partition
//! values decide already decided.
//!
//! A file partitioned by `identity(region)` with `region = 'eu'` needs no row checked
//! against `region = 'eu'`: that comparison is true for all its rows. Java's server
//! narrows residuals this way (its `ResidualEvaluator`); iceberg-rust has no such
//! evaluator, so this one works on the REST filter itself:
//! - a comparison of an identity-partitioned column with a literal becomes `true` or
//!   `false` from the file's value; `and`, `or` and `not` then simplify;
//! - anything else (other columns, other transforms, transform terms, a null partition
//!   value but for `is-null`/`not-null`, floats, a value that does not convert) stays as it
//!   is, which is always right: a residual may be wider than needed, never narrower.
//!
//! Pure: the filter, the file's partition values and the schema go in.

use std::cmp::Ordering;
use std::collections::HashMap;

use iceberg::spec::{Datum, PrimitiveLiteral, PrimitiveType, Schema, Struct, Transform, Type};
use serde_json::{json, Value};

use super::filter::datum;

/// What is left of a filter for one file.
#[derive(Debug, PartialEq)]
pub enum Residual {
    /// Every row of the file matches: no residual.
    True,
    /// No row does.
    False,
    /// The rows must still be checked against this.
    Filter(Value),
}

/// A column's type and its value in every row of the file (`None`: null).
pub type ColumnValue = (PrimitiveType, Option<Datum>);

/// The values of a file's identity partition fields, by source column id.
pub type IdentityValues = HashMap<i32, ColumnValue>;

/// A file's identity partition values, from its partition tuple and its spec's fields
/// (`(source id, transform)` in the tuple's order).
pub fn identity_values(
    schema: &Schema,
    fields: &[(i32, Transform)],
    partition: &Struct,
) -> IdentityValues {
    let mut values = HashMap::new();
    for ((source, transform), value) in fields.iter().zip(partition.iter()) {
        if *transform != Transform::Identity {
            continue;
        }
        let Some(Type::Primitive(ty)) = schema.field_by_id(*source).map(|f| &*f.field_type) else {
            continue;
        };
        let value = match value {
            None => None,
            // Through the spec's single-value JSON, which `datum` reads as a filter's.
            Some(literal) => match literal
                .clone()
                .try_into_json(&Type::Primitive(ty.clone()))
                .ok()
                .and_then(|json| datum(&json, ty).ok())
            {
                Some(datum) => Some(datum),
                None => continue,
            },
        };
        values.insert(*source, (ty.clone(), value));
    }
    values
}

/// The filter narrowed by the file's identity partition values.
pub fn residual(
    filter: &Value,
    values: &IdentityValues,
    schema: &Schema,
    case_sensitive: bool,
) -> Residual {
    if values.is_empty() {
        return Residual::Filter(filter.clone());
    }
    narrow(filter, &|name| {
        let field = if case_sensitive {
            schema.field_by_name(name)
        } else {
            schema.field_by_name_case_insensitive(name)
        }?;
        values.get(&field.id)
    })
}

fn narrow<'a>(filter: &Value, value_of: &dyn Fn(&str) -> Option<&'a ColumnValue>) -> Residual {
    let kind = filter.get("type").and_then(Value::as_str).unwrap_or("");
    let part = |name: &str| match filter.get(name) {
        Some(child) => narrow(child, value_of),
        None => Residual::Filter(filter.clone()),
    };
    match kind {
        "true" => Residual::True,
        "false" => Residual::False,
        "and" => match (part("left"), part("right")) {
            (Residual::False, _) | (_, Residual::False) => Residual::False,
            (Residual::True, other) | (other, Residual::True) => other,
            (Residual::Filter(l), Residual::Filter(r)) => {
                Residual::Filter(json!({ "type": "and", "left": l, "right": r }))
            }
        },
        "or" => match (part("left"), part("right")) {
            (Residual::True, _) | (_, Residual::True) => Residual::True,
            (Residual::False, other) | (other, Residual::False) => other,
            (Residual::Filter(l), Residual::Filter(r)) => {
                Residual::Filter(json!({ "type": "or", "left": l, "right": r }))
            }
        },
        "not" => match part("child") {
            Residual::True => Residual::False,
            Residual::False => Residual::True,
            Residual::Filter(c) => Residual::Filter(json!({ "type": "not", "child": c })),
        },
        _ => {
            let decided = filter
                .get("term")
                .and_then(Value::as_str)
                .and_then(value_of)
                .and_then(|(ty, value)| decide(kind, filter, ty, value.as_ref()));
            match decided {
                Some(true) => Residual::True,
                Some(false) => Residual::False,
                None => Residual::Filter(filter.clone()),
            }
        }
    }
}

/// A comparison's outcome for a file whose column holds `value` in every row, if known.
fn decide(kind: &str, filter: &Value, ty: &PrimitiveType, value: Option<&Datum>) -> Option<bool> {
    match (kind, value) {
        ("is-null", v) => return Some(v.is_none()),
        ("not-null", v) => return Some(v.is_some()),
        (_, None) => return None,
        _ => {}
    }
    let value = value?;
    // Floats compare by their total order here (-0.0 < 0.0), not as rows do: left alone.
    if matches!(ty, PrimitiveType::Float | PrimitiveType::Double) {
        return None;
    }
    let literal = || datum(filter.get("value")?, ty).ok();
    let order = || value.partial_cmp(&literal()?);
    let prefix = || match (value.literal(), literal()?.literal()) {
        (PrimitiveLiteral::String(v), PrimitiveLiteral::String(p)) => {
            Some(v.starts_with(p.as_str()))
        }
        _ => None,
    };
    let member = || {
        let values = filter.get("values")?.as_array()?;
        let mut found = false;
        for v in values {
            found |= datum(v, ty).ok()? == *value;
        }
        Some(found)
    };
    match kind {
        "eq" => order().map(|o| o == Ordering::Equal),
        "not-eq" => order().map(|o| o != Ordering::Equal),
        "lt" => order().map(|o| o == Ordering::Less),
        "lt-eq" => order().map(|o| o != Ordering::Greater),
        "gt" => order().map(|o| o == Ordering::Greater),
        "gt-eq" => order().map(|o| o != Ordering::Less),
        "starts-with" => prefix(),
        "not-starts-with" => prefix().map(|p| !p),
        "in" => member(),
        "not-in" => member().map(|m| !m),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{Literal, NestedField};
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
                    "region",
                    Type::Primitive(PrimitiveType::String),
                )),
                Arc::new(NestedField::optional(
                    3,
                    "day",
                    Type::Primitive(PrimitiveType::Date),
                )),
            ])
            .build()
            .unwrap()
    }

    /// A file partitioned by identity(region) and day(day).
    fn narrowed(filter: Value, region: Option<&str>, case_sensitive: bool) -> Residual {
        let schema = schema();
        let fields = [(2, Transform::Identity), (3, Transform::Day)];
        let partition =
            Struct::from_iter([region.map(Literal::string), Some(Literal::int(19_753))]);
        let values = identity_values(&schema, &fields, &partition);
        residual(&filter, &values, &schema, case_sensitive)
    }

    fn eu(filter: Value) -> Residual {
        narrowed(filter, Some("eu"), true)
    }

    #[test]
    fn identity_partition_values_decide_their_comparisons() {
        let region =
            |kind: &str, value: &str| json!({"type": kind, "term": "region", "value": value});
        let id = json!({"type": "gt", "term": "id", "value": 5});
        assert_eq!(eu(region("eq", "eu")), Residual::True);
        assert_eq!(eu(region("eq", "us")), Residual::False);
        assert_eq!(eu(region("not-eq", "us")), Residual::True);
        assert_eq!(eu(region("lt", "fr")), Residual::True);
        assert_eq!(eu(region("gt-eq", "fr")), Residual::False);
        assert_eq!(eu(region("starts-with", "e")), Residual::True);
        assert_eq!(eu(region("not-starts-with", "e")), Residual::False);
        let among = |kind: &str| json!({"type": kind, "term": "region", "values": ["us", "eu"]});
        assert_eq!(eu(among("in")), Residual::True);
        assert_eq!(eu(among("not-in")), Residual::False);
        assert_eq!(
            eu(json!({"type": "is-null", "term": "region"})),
            Residual::False
        );
        assert_eq!(
            eu(json!({"type": "not-null", "term": "region"})),
            Residual::True
        );
        // What is decided drops out of `and`, `or` and `not`; the rest stays.
        let and = json!({"type": "and", "left": region("eq", "eu"), "right": id});
        assert_eq!(eu(and), Residual::Filter(id.clone()));
        let or = json!({"type": "or", "left": region("eq", "us"), "right": id});
        assert_eq!(eu(or), Residual::Filter(id.clone()));
        let not = json!({"type": "not", "child": {"type": "and", "left": id, "right": region("eq", "eu")}});
        assert_eq!(
            eu(not),
            Residual::Filter(json!({"type": "not", "child": id}))
        );
        assert_eq!(
            eu(json!({"type": "not", "child": region("eq", "eu")})),
            Residual::False
        );
        // Case-insensitive names find the column only when asked to.
        assert_eq!(
            narrowed(region("eq", "eu").tap_term("REGION"), Some("eu"), false),
            Residual::True
        );
        let upper = region("eq", "eu").tap_term("REGION");
        assert_eq!(
            narrowed(upper.clone(), Some("eu"), true),
            Residual::Filter(upper)
        );
    }

    #[test]
    fn what_the_values_cannot_decide_stays() {
        // Another transform's column, a transform term, a null value, an unreadable literal.
        let day = json!({"type": "eq", "term": "day", "value": "2024-01-31"});
        assert_eq!(eu(day.clone()), Residual::Filter(day));
        let bucket = json!({"type": "eq", "value": 1,
            "term": {"type": "transform", "transform": "bucket[4]", "term": "region"}});
        assert_eq!(eu(bucket.clone()), Residual::Filter(bucket));
        let eq = json!({"type": "eq", "term": "region", "value": "eu"});
        assert_eq!(narrowed(eq.clone(), None, true), Residual::Filter(eq));
        let null = json!({"type": "is-null", "term": "region"});
        assert_eq!(narrowed(null, None, true), Residual::True);
        let odd = json!({"type": "eq", "term": "region", "value": 7});
        assert_eq!(eu(odd.clone()), Residual::Filter(odd));
    }

    #[test]
    fn dates_convert_through_their_json_text() {
        let schema = schema();
        let partition = Struct::from_iter([Some(Literal::date(19_753))]);
        let values = identity_values(&schema, &[(3, Transform::Identity)], &partition);
        let on = |value: Value| {
            let filter = json!({"type": "eq", "term": "day", "value": value});
            residual(&filter, &values, &schema, true)
        };
        assert_eq!(on(json!("2024-01-31")), Residual::True);
        assert_eq!(on(json!(19_753)), Residual::True);
        assert_eq!(on(json!("2024-02-01")), Residual::False);
    }

    trait TapTerm {
        fn tap_term(self, term: &str) -> Value;
    }

    impl TapTerm for Value {
        fn tap_term(mut self, term: &str) -> Value {
            self["term"] = term.into();
            self
        }
    }
}
