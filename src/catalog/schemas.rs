//! What a schema must be for Floe to keep it, beyond what iceberg-rust checks: checked on
//! every schema a table or view is created with, given (`add-schema`) or registered with
//! (a register or a notification reads a file), so that a refused one is a 400 that
//! changes nothing.
//!
//! - **Nesting** at most [`MAX_TYPE_DEPTH`] types deep. A stored document is read back
//!   with serde_json's recursion limit (128 levels), and each struct level of a schema is
//!   three JSON levels (`fields`, the field, its `type`); a request at the limit would be
//!   kept and then fail every later read that parses it.
//! - **Defaults** (`initial-default`, `write-default`) that iceberg-rust can write back:
//!   its conversion of a temporal value to text panics on a date or instant past what a
//!   calendar holds, a time outside a day, and a `timestamptz` before 1970 with a fraction
//!   of a second (its arithmetic there is wrong; the last is a valid value that Floe has
//!   to refuse until iceberg-rust is fixed).
//!
//! Pure.

use iceberg::spec::{Literal, NestedField, PrimitiveLiteral, PrimitiveType, Schema, Type};

use super::error::{CatalogError, CatalogResult};
use super::temporal;

/// The deepest nesting of types a schema may have (a struct, list or map inside another
/// is one level more). Real schemas stay far below it.
pub const MAX_TYPE_DEPTH: usize = 32;

/// Checks `schema` as the module says.
pub fn check(schema: &Schema) -> CatalogResult<()> {
    for field in schema.as_struct().fields() {
        check_field(field, 1)?;
    }
    Ok(())
}

/// Checks each of `schemas` (a registered file's) as [`check`] does.
pub fn check_each<'a>(
    schemas: impl IntoIterator<Item = &'a iceberg::spec::SchemaRef>,
) -> CatalogResult<()> {
    schemas.into_iter().try_for_each(|schema| check(schema))
}

/// `depth`: how many types deep `field` lies (1 for a top-level field).
fn check_field(field: &NestedField, depth: usize) -> CatalogResult<()> {
    if depth > MAX_TYPE_DEPTH {
        return Err(CatalogError::bad_request(format!(
            "Schema is nested too deeply: field {} lies {depth} types deep, more than the {MAX_TYPE_DEPTH} this catalog keeps",
            field.name
        )));
    }
    for (kind, default) in [
        ("initial-default", &field.initial_default),
        ("write-default", &field.write_default),
    ] {
        if let Some(literal) = default {
            if let Some(why) = unwritable(literal, &field.field_type) {
                return Err(CatalogError::bad_request(format!(
                    "The {kind} of field {} cannot be kept: {why}",
                    field.name
                )));
            }
        }
    }
    match field.field_type.as_ref() {
        Type::Primitive(_) => Ok(()),
        Type::Struct(inner) => (inner.fields().iter()).try_for_each(|f| check_field(f, depth + 1)),
        Type::List(list) => check_field(&list.element_field, depth + 1),
        Type::Map(map) => {
            check_field(&map.key_field, depth + 1)?;
            check_field(&map.value_field, depth + 1)
        }
    }
}

/// Why iceberg-rust could not write `literal` of type `ty` back as text, if it could not:
/// a struct's, list's or map's default holds values of its inner types, each written as
/// one of those would be.
fn unwritable(literal: &Literal, ty: &Type) -> Option<&'static str> {
    match (literal, ty) {
        (Literal::Primitive(value), Type::Primitive(ty)) => unwritable_primitive(value, ty),
        (Literal::Struct(values), Type::Struct(fields)) => (values.iter())
            .zip(fields.fields())
            .find_map(|(value, field)| unwritable(value?, &field.field_type)),
        (Literal::List(items), Type::List(list)) => (items.iter().flatten())
            .find_map(|item| unwritable(item, &list.element_field.field_type)),
        (Literal::Map(map), Type::Map(types)) => {
            // A map lends its pairs only by value; defaults are small and rare.
            map.clone().into_iter().find_map(|(key, value)| {
                unwritable(&key, &types.key_field.field_type)
                    .or_else(|| unwritable(value.as_ref()?, &types.value_field.field_type))
            })
        }
        _ => None,
    }
}

/// [`unwritable`] for a primitive value.
fn unwritable_primitive(value: &PrimitiveLiteral, ty: &PrimitiveType) -> Option<&'static str> {
    const MICROS: i64 = 1_000_000;
    const NANOS: i64 = 1_000_000_000;
    let calendar = "it is past the dates a calendar holds";
    let fraction = "a timestamptz before 1970 with a fraction of a second";
    match (ty, value) {
        (PrimitiveType::Date, PrimitiveLiteral::Int(days)) => {
            temporal::date(*days).is_none().then_some(calendar)
        }
        (PrimitiveType::Time, PrimitiveLiteral::Long(micros)) => {
            (temporal::time(*micros).is_none()).then_some("a time must lie within a day")
        }
        (PrimitiveType::Timestamp, PrimitiveLiteral::Long(micros)) => {
            temporal::instant(*micros).is_none().then_some(calendar)
        }
        (PrimitiveType::Timestamptz, PrimitiveLiteral::Long(micros)) => {
            if temporal::instant(*micros).is_none() {
                Some(calendar)
            } else {
                (*micros < 0 && micros % MICROS != 0).then_some(fraction)
            }
        }
        (PrimitiveType::TimestamptzNs, PrimitiveLiteral::Long(nanos)) => {
            (*nanos < 0 && nanos % NANOS != 0).then_some(fraction)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn schema(field: NestedField) -> Schema {
        Schema::builder()
            .with_fields(vec![Arc::new(field)])
            .build()
            .unwrap()
    }

    fn nested(levels: usize) -> Schema {
        let mut ty = Type::Primitive(PrimitiveType::Int);
        for i in 0..levels {
            let element = NestedField::list_element(1000 + i as i32, ty, false);
            ty = Type::List(iceberg::spec::ListType::new(Arc::new(element)));
        }
        schema(NestedField::optional(1, "deep", ty))
    }

    #[test]
    fn schemas_nested_past_the_limit_are_refused() {
        // The top-level field is one type deep, each list one more.
        check(&nested(MAX_TYPE_DEPTH - 1)).unwrap();
        let error = check(&nested(MAX_TYPE_DEPTH)).unwrap_err().to_string();
        assert!(error.contains("nested too deeply"), "{error}");
    }

    #[test]
    fn values_inside_a_nested_default_are_checked_as_their_types() {
        use iceberg::spec::{ListType, MapType, StructType};
        let date = |days| Some(Literal::Primitive(PrimitiveLiteral::Int(days)));
        let date_type = || Type::Primitive(PrimitiveType::Date);
        let list = Type::List(ListType::new(Arc::new(NestedField::list_element(
            2,
            date_type(),
            false,
        ))));
        let strukt = Type::Struct(StructType::new(vec![Arc::new(NestedField::optional(
            2,
            "d",
            date_type(),
        ))]));
        let map = Type::Map(MapType::new(
            Arc::new(NestedField::map_key_element(2, date_type())),
            Arc::new(NestedField::map_value_element(3, date_type(), false)),
        ));
        let key = |days| Literal::Primitive(PrimitiveLiteral::Int(days));
        let map_of = |pairs: Vec<(Literal, Option<Literal>)>| {
            Literal::Map(iceberg::spec::Map::from_iter(pairs))
        };
        let struct_of = |value| Literal::Struct(iceberg::spec::Struct::from_iter([value]));
        let cases = [
            (
                list.clone(),
                Literal::List(vec![date(1), None, date(i32::MAX)]),
                false,
            ),
            (list, Literal::List(vec![date(1), None]), true),
            (strukt.clone(), struct_of(date(i32::MAX)), false),
            (strukt, struct_of(None), true),
            (map.clone(), map_of(vec![(key(i32::MAX), date(1))]), false),
            (map.clone(), map_of(vec![(key(1), date(i32::MAX))]), false),
            (map, map_of(vec![(key(1), date(2)), (key(3), None)]), true),
        ];
        for (ty, default, keepable) in cases {
            let schema = schema(
                NestedField::optional(1, "f", ty.clone()).with_write_default(default.clone()),
            );
            match check(&schema) {
                Ok(()) => {
                    assert!(keepable, "{ty}: {default:?} was kept");
                    // And iceberg-rust writes it without a panic.
                    serde_json::to_string(&schema).unwrap();
                }
                Err(error) => {
                    let error = error.to_string();
                    assert!(!keepable && error.contains("calendar"), "{ty}: {error}");
                }
            }
        }
    }

    #[test]
    fn defaults_iceberg_rust_cannot_write_are_refused() {
        let field = |ty, default: PrimitiveLiteral| {
            schema(
                NestedField::optional(1, "f", Type::Primitive(ty))
                    .with_initial_default(Literal::Primitive(default)),
            )
        };
        for (ty, value, why) in [
            (
                PrimitiveType::Date,
                PrimitiveLiteral::Int(i32::MAX),
                "calendar",
            ),
            (
                PrimitiveType::Time,
                PrimitiveLiteral::Long(-1),
                "within a day",
            ),
            (
                PrimitiveType::Timestamp,
                PrimitiveLiteral::Long(i64::MAX),
                "calendar",
            ),
            (
                PrimitiveType::Timestamptz,
                PrimitiveLiteral::Long(-500_000),
                "fraction",
            ),
            (
                PrimitiveType::TimestamptzNs,
                PrimitiveLiteral::Long(-1),
                "fraction",
            ),
        ] {
            let error = check(&field(ty.clone(), value)).unwrap_err().to_string();
            assert!(
                error.contains(why) && error.contains("initial-default"),
                "{ty}: {error}"
            );
        }
        for (ty, value) in [
            (PrimitiveType::Date, PrimitiveLiteral::Int(-1)),
            (
                PrimitiveType::Timestamptz,
                PrimitiveLiteral::Long(-2_000_000),
            ),
            (
                PrimitiveType::Timestamptz,
                PrimitiveLiteral::Long(1_500_000),
            ),
            (PrimitiveType::Time, PrimitiveLiteral::Long(3_600_000_000)),
        ] {
            let schema = field(ty.clone(), value);
            check(&schema).unwrap();
            // And iceberg-rust writes it without a panic.
            serde_json::to_string(&schema).unwrap();
        }
    }
}
