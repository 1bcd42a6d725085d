//! JSON text written byte for byte as serde_json writes it (compact), but faster where
//! Floe writes the most: strings. serde_json decides whether to escape byte by byte;
//! locations, names and property values almost never need an escape, and one
//! branch-free pass (which the compiler vectorises) finds that out, after which the text
//! is copied as it is.
//!
//! Used for response bodies (`http::outcome`) and for every metadata document a commit
//! writes (`catalog::commit::metadata_json`), where serde_json's string escaping alone
//! was a seventh of a commit's instructions.

use serde_json::Value;

pub mod fields;
pub mod map_text;
pub mod sorted;

pub use fields::Fields;
pub use map_text::MapText;

/// Whether `text` needs an escape as a JSON string: exactly what serde_json escapes,
/// control characters, `"` and `\`.
pub fn needs_escape(text: &str) -> bool {
    text.bytes().fold(false, |any, b| {
        any | (b < 0x20) | (b == b'"') | (b == b'\\')
    })
}

/// Appends `text` as a JSON string.
pub fn push_str(out: &mut Vec<u8>, text: &str) {
    if needs_escape(text) {
        // Writing to memory cannot fail, and a string always serialises.
        serde_json::to_writer(&mut *out, text).expect("serialising to memory");
    } else {
        out.reserve(text.len() + 2);
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    }
}

/// Appends `value` as compact JSON text, as `serde_json::to_writer` would.
pub fn push_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // Integers as serde_json writes them (itoa).
        Value::Number(number) => {
            let mut buffer = itoa::Buffer::new();
            let text = match (number.as_u64(), number.as_i64()) {
                (Some(n), _) => buffer.format(n),
                (None, Some(n)) => buffer.format(n),
                // Floats (rare in metadata): serde_json's own formatting.
                (None, None) => {
                    serde_json::to_writer(&mut *out, number).expect("writing to memory");
                    return;
                }
            };
            out.extend_from_slice(text.as_bytes());
        }
        Value::String(text) => push_str(out, text),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                push_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(object) => push_object(
            out,
            object.iter().map(|(key, item)| (key.as_str(), item)),
            push_value,
        ),
    }
}

/// Appends the object of `entries`, each value written by `push_item`.
pub fn push_object<'a, V>(
    out: &mut Vec<u8>,
    entries: impl IntoIterator<Item = (&'a str, V)>,
    mut push_item: impl FnMut(&mut Vec<u8>, V),
) {
    out.push(b'{');
    for (i, (key, item)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_str(out, key);
        out.push(b':');
        push_item(out, item);
    }
    out.push(b'}');
}

/// A string-to-string map (properties) as compact JSON text, as `serde_json::to_string`
/// would write it.
pub fn map_to_string(map: &std::collections::BTreeMap<String, String>) -> String {
    // Right for nearly every map: nothing in it needs an escape.
    let len = 2 + map
        .iter()
        .map(|(k, v)| k.len() + v.len() + 6)
        .sum::<usize>();
    let mut out = Vec::with_capacity(len);
    push_object(
        &mut out,
        map.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        push_str,
    );
    String::from_utf8(out).expect("JSON text is UTF-8")
}

/// `value` as compact JSON text, as `serde_json::to_string` would write it.
pub fn to_string(value: &Value) -> String {
    let mut out = Vec::with_capacity(4096);
    push_value(&mut out, value);
    // Built from `str`s and ASCII only.
    String::from_utf8(out).expect("JSON text is UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_are_written_as_serde_json_writes_them() {
        let mut map = std::collections::BTreeMap::new();
        assert_eq!(map_to_string(&map), "{}");
        for b in 0u8..0x80 {
            map.insert(format!("k{}", b as char), format!("v{}\u{e9}", b as char));
        }
        map.insert(String::new(), String::new());
        assert_eq!(map_to_string(&map), serde_json::to_string(&map).unwrap());
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        let mut texts: Vec<String> = (0u8..0x80).map(|b| format!("a{}z", b as char)).collect();
        texts.extend(
            [
                "",
                "file:///t/metadata/1.json",
                "é\u{80}\u{9f}",
                "\u{7f}",
                "\\\"",
                "€ ☃",
            ]
            .map(String::from),
        );
        for text in texts {
            let mut ours = Vec::new();
            push_str(&mut ours, &text);
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                serde_json::to_string(&text).unwrap(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn values_are_written_as_serde_json_writes_them() {
        let values = [
            json!(null),
            json!(true),
            json!([]),
            json!({}),
            json!(0),
            json!(-1),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(1.5),
            json!(-0.0),
            json!(1e300),
            json!(0.1),
            json!(123456789.0),
            json!({"b": [1, {"x\n": "é\"", "a": null}], "a": false, "": [[]]}),
            json!({
                "format-version": 2,
                "properties": {"k": "v", "write.format.default": "parquet"},
                "snapshots": [{"snapshot-id": 3_051_729_675_574_597_004_i64, "summary": {"operation": "append"}}],
                "metadata-log": [{"metadata-file": "s3://b/t/metadata/00001-x.metadata.json", "timestamp-ms": 1_700_000_000_000_i64}],
            }),
        ];
        for value in values {
            assert_eq!(
                to_string(&value),
                serde_json::to_string(&value).unwrap(),
                "{value}"
            );
        }
    }
}
