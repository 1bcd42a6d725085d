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
//!   to refuse until iceberg-rust is fixed), and a decimal default with more digits than
//!   its precision.
//! - **Types** Iceberg's readers can hold: a decimal's precision from 1 to 38 (the spec's
//!   limit), a fixed length Java's `int` holds.
//! - **Format version** ([`check_format`], Java's `Schema.checkCompatibility`): below
//!   version 3, no nanosecond timestamps and no `initial-default`. iceberg-rust keeps
//!   both in any version, and Java's readers then refuse the table.
//! - **Defaults iceberg-rust's parser drops** ([`check_default_text`]): a default it cannot
//!   read as its field's type (`"abc"` for an int) is discarded while the body is parsed,
//!   with no error, so a table would be kept without the default its client asked for.
//!   The body's text is read a second time for them, only when it holds a default at all.
//!
//! Pure.

use iceberg::spec::{
    FormatVersion, Literal, NestedField, PrimitiveLiteral, PrimitiveType, Schema, Type,
};

use serde::Deserialize;

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
        Type::Primitive(ty) => match unholdable(ty) {
            Some(why) => Err(CatalogError::bad_request(format!(
                "Invalid type for field {}: {why}",
                field.name
            ))),
            None => Ok(()),
        },
        Type::Struct(inner) => (inner.fields().iter()).try_for_each(|f| check_field(f, depth + 1)),
        Type::List(list) => check_field(&list.element_field, depth + 1),
        Type::Map(map) => {
            check_field(&map.key_field, depth + 1)?;
            check_field(&map.value_field, depth + 1)
        }
    }
}

/// The most digits a decimal holds (the spec's limit, and Java's).
const MAX_DECIMAL_PRECISION: u32 = 38;

/// Why Iceberg's readers could not hold a column of type `ty`, if they could not.
fn unholdable(ty: &PrimitiveType) -> Option<String> {
    match *ty {
        PrimitiveType::Decimal { precision, .. }
            if precision == 0 || precision > MAX_DECIMAL_PRECISION =>
        {
            Some(format!(
                "{ty}: a decimal's precision must be from 1 to {MAX_DECIMAL_PRECISION}"
            ))
        }
        PrimitiveType::Fixed(length) if length > i32::MAX as u64 => {
            Some(format!("{ty}: a fixed length must be at most {}", i32::MAX))
        }
        _ => None,
    }
}

/// Checks that a table of format `version` may hold `schema` (the module says what).
pub fn check_format(schema: &Schema, version: FormatVersion) -> CatalogResult<()> {
    if version >= FormatVersion::V3 {
        return Ok(());
    }
    // Every field, nested ones included (the schema's own index), the lowest id first so
    // that the message names the same field each time.
    let mut fields: Vec<&NestedField> = (schema.field_id_to_fields().values())
        .map(|field| field.as_ref())
        .collect();
    fields.sort_unstable_by_key(|field| field.id);
    for field in fields {
        let what = match field.field_type.as_ref() {
            _ if field.initial_default.is_some() => {
                format!(
                    "Invalid initial default for {}: a non-null default",
                    field.name
                )
            }
            Type::Primitive(ty @ (PrimitiveType::TimestampNs | PrimitiveType::TimestamptzNs)) => {
                format!("Invalid type for {}: {ty}", field.name)
            }
            _ => continue,
        };
        return Err(CatalogError::bad_request(format!(
            "{what} is not supported until v3 (the table is {version})"
        )));
    }
    Ok(())
}

/// Refuses a default in `body` (a request's or a metadata file's JSON) that is not a value
/// of its field's type. iceberg-rust's parser drops such a default rather than failing,
/// so the typed body cannot tell; this reads the text again as plain JSON, and only when
/// it names a default at all (a byte search, so no other body pays for a second parse).
/// A key may spell any of its characters as a `\uXXXX` escape, which the byte search
/// cannot see through: a body with any such escape is parsed as well.
/// A field is any object with a numeric `id`, a string `name` and a `type` that parses
/// as an Iceberg type: property maps, whose values are all strings, never look like one.
/// Called only on text the typed parse took.
pub fn check_default_text(body: &[u8]) -> CatalogResult<()> {
    if memchr::memmem::find(body, b"-default\"").is_none()
        && memchr::memmem::find(body, b"\\u").is_none()
    {
        return Ok(());
    }
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(value) => check_default_value(&value),
        // Called once the typed parse took the text, which skips unknown keys at any
        // depth: the plain parse can then fail only past its 128 levels. Refused, or
        // such a key would hide a default from this check.
        Err(e) => Err(CatalogError::bad_request(format!(
            "The body cannot be read as plain JSON to check its defaults: {e}"
        ))),
    }
}

/// [`check_default_text`] over one parsed value. Its depth is bounded by serde_json's
/// recursion limit (128), which the text was parsed with.
fn check_default_value(value: &serde_json::Value) -> CatalogResult<()> {
    use serde_json::Value;
    let map = match value {
        Value::Array(items) => return items.iter().try_for_each(check_default_value),
        Value::Object(map) => map,
        _ => return Ok(()),
    };
    if let (Some(Value::Number(_)), Some(Value::String(name)), Some(ty)) =
        (map.get("id"), map.get("name"), map.get("type"))
    {
        if let Ok(ty) = Type::deserialize(ty) {
            for kind in ["initial-default", "write-default"] {
                let Some(default) = map.get(kind).filter(|value| !value.is_null()) else {
                    continue;
                };
                if let Type::Primitive(PrimitiveType::TimestampNs | PrimitiveType::TimestamptzNs) =
                    ty
                {
                    return Err(CatalogError::bad_request(format!(
                        "Invalid {kind} for field {name}: a default of a nanosecond timestamp is not supported yet (iceberg-rust, which Floe keeps schemas with, cannot read one)"
                    )));
                }
                if !default_fits(default, &ty) {
                    let mut shown = default.to_string();
                    if shown.len() > 64 {
                        let end = (0..=61).rev().find(|&i| shown.is_char_boundary(i));
                        shown.truncate(end.unwrap_or(0));
                        shown.push_str("...");
                    }
                    return Err(CatalogError::bad_request(format!(
                        "Invalid {kind} for field {name}: {shown} is not a value of type {ty}"
                    )));
                }
            }
        }
    }
    map.values().try_for_each(check_default_value)
}

/// Whether `value` (not null) is a value of type `ty` in the spec's JSON form, every part
/// of it: iceberg-rust also drops, without an error, a struct's member it cannot read, a
/// member under a key that is no field's id, and a map's keys or values past the shorter
/// of the two lists.
fn default_fits(value: &serde_json::Value, ty: &Type) -> bool {
    use serde_json::Value;
    let fits = |value: &Value, ty: &Type| value.is_null() || default_fits(value, ty);
    match (ty, value) {
        // iceberg-rust's decimal parser also takes `NaN` and `Infinity`, and rounds a
        // value to the type's scale; the spec (and Java) want the scale written exactly.
        (Type::Primitive(PrimitiveType::Decimal { scale, .. }), Value::String(text))
            if !decimal_text_fits(text, *scale) =>
        {
            false
        }
        (Type::Primitive(_), _) => match Literal::try_from_json(value.clone(), ty) {
            // A float past f32's range becomes infinite, and is written back as null (a
            // double cannot: serde_json refuses a number past f64's range).
            Ok(Some(Literal::Primitive(PrimitiveLiteral::Float(f)))) => f.is_finite(),
            Ok(Some(_)) => true,
            _ => false,
        },
        (Type::Struct(fields), Value::Object(members)) => members.iter().all(|(id, member)| {
            // iceberg-rust looks a member up by the id's exact text (not `+2` nor `02`).
            (fields.fields().iter())
                .find(|field| *id == field.id.to_string())
                .is_some_and(|field| fits(member, &field.field_type))
        }),
        (Type::List(list), Value::Array(items)) => {
            (items.iter()).all(|item| fits(item, &list.element_field.field_type))
        }
        (Type::Map(map), Value::Object(pair)) => match (pair.get("keys"), pair.get("values")) {
            (Some(Value::Array(keys)), Some(Value::Array(values))) => {
                keys.len() == values.len()
                    && (keys.iter()).all(|key| default_fits(key, &map.key_field.field_type))
                    && (values.iter()).all(|value| fits(value, &map.value_field.field_type))
            }
            _ => false,
        },
        _ => false,
    }
}

/// Whether `text` is a decimal in the spec's single-value form for a type of `scale`: an
/// optional sign, digits with an optional point and fraction, an optional exponent; its
/// scale (fraction digits less the exponent, as Java's `BigDecimal` counts it) exactly
/// the type's. (Too many digits for the precision: `unwritable_primitive`.)
fn decimal_text_fits(text: &str, scale: u32) -> bool {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let (number, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((number, exponent)) => match exponent.parse::<i64>() {
            Ok(exponent) => (number, exponent),
            Err(_) => return false,
        },
        None => (unsigned, 0),
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if number.is_empty() || number == "." || !digits(whole) || !digits(fraction) {
        return false;
    }
    i64::try_from(fraction.len())
        .ok()
        .and_then(|digits| digits.checked_sub(exponent))
        == Some(i64::from(scale))
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
        // iceberg-rust keeps a default's value whatever its digits: `123456.7` in a
        // decimal(3, 1).
        (PrimitiveType::Decimal { precision, .. }, PrimitiveLiteral::Int128(unscaled)) => {
            let most = 10u128.checked_pow(*precision).unwrap_or(u128::MAX);
            (unscaled.unsigned_abs() >= most).then_some("it has more digits than its precision")
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
    fn defaults_that_are_not_values_of_their_type_are_refused() {
        let field = |default: &str, ty: &str| {
            format!(
                r#"{{"schema": {{"type": "struct", "fields": [{{"id": 1, "name": "n", "required": false, "type": {ty}, "write-default": {default}}}]}}}}"#
            )
        };
        for (default, ty) in [
            (r#""abc""#, r#""int""#),
            ("1.5", r#""int""#),
            ("3000000000", r#""int""#),
            ("1", r#""string""#),
            (r#""2024-13-45""#, r#""date""#),
            (r#""NaN""#, r#""decimal(9,2)""#),
            (r#""Infinity""#, r#""decimal(9,2)""#),
            (r#""1.5""#, r#""decimal(9,2)""#),
            (r#""1.505""#, r#""decimal(9,2)""#),
            (r#""1.50e1""#, r#""decimal(9,2)""#),
            (r#"".""#, r#""decimal(9,0)""#),
            (r#""1e-9223372036854775808""#, r#""decimal(9,0)""#),
            (r#""1.00""#, r#""decimal(9,0)""#),
            ("1.50", r#""decimal(9,2)""#),
            ("1e39", r#""float""#),
            (r#""2024-01-01T00:00:00.000000001""#, r#""timestamp_ns""#),
            (
                r#"{"+2": 1}"#,
                r#"{"type": "struct", "fields": [{"id": 2, "name": "i", "required": false, "type": "int"}]}"#,
            ),
            (
                r#"{"2": "x"}"#,
                r#"{"type": "struct", "fields": [{"id": 2, "name": "i", "required": false, "type": "int"}]}"#,
            ),
            (
                r#"{"3": 1}"#,
                r#"{"type": "struct", "fields": [{"id": 2, "name": "i", "required": false, "type": "int"}]}"#,
            ),
            (
                r#"[1, "x"]"#,
                r#"{"type": "list", "element-id": 2, "element": "int", "element-required": false}"#,
            ),
            (
                r#"{"keys": ["a", "b"], "values": [1]}"#,
                r#"{"type": "map", "key-id": 2, "key": "string", "value-id": 3, "value": "int", "value-required": false}"#,
            ),
            (
                r#"{"keys": [null], "values": [1]}"#,
                r#"{"type": "map", "key-id": 2, "key": "string", "value-id": 3, "value": "int", "value-required": false}"#,
            ),
        ] {
            let error = match check_default_text(field(default, ty).as_bytes()) {
                Err(error) => error.to_string(),
                Ok(()) => panic!("{default} passed as a {ty}"),
            };
            assert!(
                error.contains("Invalid write-default for field n"),
                "{default}: {error}"
            );
        }
        // Values of their types, null, and fields nested in a list of updates pass.
        for (default, ty) in [
            ("5", r#""int""#),
            ("null", r#""int""#),
            (r#""abc""#, r#""string""#),
            (r#""2024-01-31""#, r#""date""#),
            (r#""-14.20""#, r#""decimal(9,2)""#),
            (r#""+0.00""#, r#""decimal(1,2)""#),
            (r#""1234.56""#, r#""decimal(6,2)""#),
            (r#""0001234.56""#, r#""decimal(6,2)""#),
            (r#""12""#, r#""decimal(2,0)""#),
            (r#""1.2345E+2""#, r#""decimal(9,2)""#),
            ("1.5", r#""float""#),
            (
                r#"{"2": 7}"#,
                r#"{"type": "struct", "fields": [{"id": 2, "name": "i", "required": false, "type": "int"}]}"#,
            ),
            (
                r#"{"2": null}"#,
                r#"{"type": "struct", "fields": [{"id": 2, "name": "i", "required": false, "type": "int"}]}"#,
            ),
            (
                r#"[1, null]"#,
                r#"{"type": "list", "element-id": 2, "element": "int", "element-required": false}"#,
            ),
            (
                r#"{"keys": ["a", "b"], "values": [1, null]}"#,
                r#"{"type": "map", "key-id": 2, "key": "string", "value-id": 3, "value": "int", "value-required": false}"#,
            ),
        ] {
            check_default_text(field(default, ty).as_bytes()).unwrap();
        }
        let nested = r#"{"updates": [{"action": "add-schema", "schema": {"type": "struct", "fields": [
            {"id": 1, "name": "s", "required": false, "type": {"type": "struct", "fields": [
                {"id": 2, "name": "inner", "required": false, "type": "long", "initial-default": "x"}]}}]}}]}"#;
        let error = check_default_text(nested.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(error.contains("initial-default for field inner"), "{error}");
        // A property map that happens to use the same keys is not a field: its values are
        // strings, never a numeric id.
        let properties =
            r#"{"properties": {"id": "1", "name": "n", "type": "int", "write-default": "abc"}}"#;
        check_default_text(properties.as_bytes()).unwrap();
        // A default whose key is spelled with escapes, which the byte search misses.
        for key in [r#"write\u002ddefault"#, r#"initial-defaul\u0074"#] {
            let escaped = field(r#""abc""#, r#""int""#).replace("write-default", key);
            assert!(!escaped.contains("-default\""), "{escaped}");
            let error = check_default_text(escaped.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(error.contains("default for field n"), "{error}");
        }
        // A default hidden past the plain parse's depth by a deeply nested other key.
        let deep = format!(
            r#"{{"junk": {}1{}, "f": {}}}"#,
            "[".repeat(200),
            "]".repeat(200),
            field(r#""abc""#, r#""int""#)
        );
        let error = check_default_text(deep.as_bytes()).unwrap_err().to_string();
        assert!(error.contains("cannot be read as plain JSON"), "{error}");
        // A long value is cut in the message.
        let long = format!(r#""{}""#, "é".repeat(100));
        let error = check_default_text(field(&long, r#""int""#).as_bytes())
            .unwrap_err()
            .to_string();
        assert!(error.contains("...") && error.len() < 200, "{error}");
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
            (
                PrimitiveType::Decimal {
                    precision: 3,
                    scale: 1,
                },
                PrimitiveLiteral::Int128(-1000),
                "more digits",
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
            (
                PrimitiveType::Decimal {
                    precision: 3,
                    scale: 1,
                },
                PrimitiveLiteral::Int128(-999),
            ),
        ] {
            let schema = field(ty.clone(), value);
            check(&schema).unwrap();
            // And iceberg-rust writes it without a panic.
            serde_json::to_string(&schema).unwrap();
        }
    }

    #[test]
    fn types_iceberg_readers_cannot_hold_are_refused() {
        let column = |ty| schema(NestedField::optional(1, "c", Type::Primitive(ty)));
        for (ty, why) in [
            (
                PrimitiveType::Decimal {
                    precision: 39,
                    scale: 2,
                },
                "from 1 to 38",
            ),
            (
                PrimitiveType::Decimal {
                    precision: 0,
                    scale: 0,
                },
                "from 1 to 38",
            ),
            (PrimitiveType::Fixed(1 << 31), "at most 2147483647"),
        ] {
            let error = check(&column(ty.clone())).unwrap_err().to_string();
            assert!(
                error.contains(why) && error.contains("field c"),
                "{ty}: {error}"
            );
        }
        for ty in [
            PrimitiveType::Decimal {
                precision: 38,
                scale: 38,
            },
            PrimitiveType::Fixed(i32::MAX as u64),
        ] {
            check(&column(ty)).unwrap();
        }
    }

    #[test]
    fn nested_fields_are_held_to_the_format_version_too() {
        use iceberg::spec::{ListType, StructType};
        let nanos = NestedField::optional(3, "at", Type::Primitive(PrimitiveType::TimestampNs));
        let inner = Type::Struct(StructType::new(vec![Arc::new(nanos)]));
        let element = NestedField::list_element(2, inner, false);
        let nested = schema(NestedField::optional(
            1,
            "events",
            Type::List(ListType::new(Arc::new(element))),
        ));
        let error = check_format(&nested, FormatVersion::V2)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("Invalid type for at: timestamp_ns"),
            "{error}"
        );
        check_format(&nested, FormatVersion::V3).unwrap();
        let default = schema(
            NestedField::optional(1, "n", Type::Primitive(PrimitiveType::Int))
                .with_initial_default(Literal::Primitive(PrimitiveLiteral::Int(1))),
        );
        let error = check_format(&default, FormatVersion::V1)
            .unwrap_err()
            .to_string();
        assert!(error.contains("Invalid initial default for n"), "{error}");
    }
}
