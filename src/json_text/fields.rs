//! Where each top-level field of a JSON object's text lies, so that a document differing
//! from one already written in a few fields is written by copying the others' text.
//!
//! Why: a commit that only sets or removes properties changes three fields of a table's
//! metadata document (`properties`, `last-updated-ms`, `metadata-log`) and one of a
//! view's (`properties`). Writing the whole document again cloned the table's model
//! (iceberg-rust serialises through a copy of it, properties and metadata log included)
//! and serialised every schema, spec, snapshot and ref: about 60 µs for a table of the
//! Polaris benchmark, whose writes are exactly such commits (BENCHMARKS.md, "Documents
//! spliced from their base"). `catalog::parsed` keeps these spans beside the model a
//! document was written from; the next commit of that object copies the unchanged fields.
//!
//! The spans are recorded by `json_text::sorted` as it writes a document (its top-level
//! keys in order), and by [`Fields::splice`] for the text it writes, so a chain of commits
//! keeps them.

use std::ops::Range;

use super::push_str;

/// The top-level fields of an object's text, in the order they appear (key order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fields {
    spans: Vec<Span>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Span {
    /// The key's text, between its quotes.
    key: Range<u32>,
    /// The value's text.
    value: Range<u32>,
}

impl Fields {
    /// Notes the next field (the key's text between its quotes, then the value's); `false`
    /// when the text is too long to be described (over 4 GiB).
    #[must_use]
    pub(super) fn push(&mut self, key: Range<usize>, value: Range<usize>) -> bool {
        let narrow =
            |r: Range<usize>| Some(u32::try_from(r.start).ok()?..u32::try_from(r.end).ok()?);
        match (narrow(key), narrow(value)) {
            (Some(key), Some(value)) => {
                self.spans.push(Span { key, value });
                true
            }
            _ => false,
        }
    }

    /// Bytes held (for caches' budgets).
    pub fn size(&self) -> usize {
        self.spans.capacity() * std::mem::size_of::<Span>()
    }

    /// `base` (the text these fields describe) with `changes` made: each a key and the
    /// value text to write for it (replacing the field, or inserted in key order), or
    /// `None` to drop the field. `changes` must be in key order. The caller vouches that
    /// each value text is the JSON the field would be written as. `None` when a key of
    /// `base` is escaped (the order could not be told from its text), when `changes` are
    /// not in order, or when the spans do not fit `base`.
    pub fn splice(&self, base: &str, changes: &[(&str, Option<&str>)]) -> Option<(String, Fields)> {
        if !changes.windows(2).all(|w| w[0].0 < w[1].0) {
            return None;
        }
        let slice = |r: &Range<u32>| base.get(r.start as usize..r.end as usize);
        let added: usize = changes
            .iter()
            .map(|(k, v)| k.len() + v.map_or(0, str::len) + 4)
            .sum();
        let mut out = Vec::with_capacity(base.len() + added);
        let mut fields = Fields {
            spans: Vec::with_capacity(self.spans.len() + changes.len()),
        };
        out.push(b'{');
        let mut changes = changes.iter().peekable();
        for span in &self.spans {
            let key = slice(&span.key)?;
            if key.contains('\\') {
                return None;
            }
            while let Some((change, value)) = changes.next_if(|(change, _)| *change < key) {
                if let Some(value) = value {
                    write(&mut out, &mut fields, Field::New(change), value).then_some(())?;
                }
            }
            let value = match changes.next_if(|(change, _)| *change == key) {
                Some((_, change)) => *change,
                None => Some(slice(&span.value)?),
            };
            if let Some(value) = value {
                write(&mut out, &mut fields, Field::Plain(key), value).then_some(())?;
            }
        }
        for (change, value) in changes {
            if let Some(value) = value {
                write(&mut out, &mut fields, Field::New(change), value).then_some(())?;
            }
        }
        out.push(b'}');
        // Copied from a `str` and JSON text the caller vouches for, at char boundaries.
        Some((String::from_utf8(out).ok()?, fields))
    }
}

/// A key as written: copied from text that needs no escape, or a new one.
enum Field<'a> {
    Plain(&'a str),
    New(&'a str),
}

/// Appends the field `"key":value` (after a comma unless it is the first) and notes it;
/// `false` when the text grows too long to be described.
fn write(out: &mut Vec<u8>, fields: &mut Fields, key: Field, value: &str) -> bool {
    if !fields.spans.is_empty() {
        out.push(b',');
    }
    let key_start = out.len() + 1;
    match key {
        Field::Plain(key) => {
            out.push(b'"');
            out.extend_from_slice(key.as_bytes());
            out.push(b'"');
        }
        Field::New(key) => push_str(out, key),
    }
    let key_end = out.len() - 1;
    out.push(b':');
    let value_start = out.len();
    out.extend_from_slice(value.as_bytes());
    fields.push(key_start..key_end, value_start..out.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_text::sorted;
    use serde_json::json;

    fn written(value: &serde_json::Value) -> (String, Fields) {
        let (text, fields) = sorted::to_document(value, &[], &[]).unwrap();
        (text, fields.expect("an object's fields"))
    }

    #[test]
    fn the_writer_notes_each_top_level_field() {
        let (text, fields) = written(&json!({"b": [1, {"x": 2}], "a": "s", "c": {"k": "v"}}));
        assert_eq!(text, r#"{"a":"s","b":[1,{"x":2}],"c":{"k":"v"}}"#);
        let seen: Vec<(&str, &str)> = fields
            .spans
            .iter()
            .map(|s| {
                (
                    &text[s.key.start as usize..s.key.end as usize],
                    &text[s.value.start as usize..s.value.end as usize],
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("a", r#""s""#),
                ("b", r#"[1,{"x":2}]"#),
                ("c", r#"{"k":"v"}"#)
            ]
        );
        // Only an object has fields.
        assert_eq!(
            sorted::to_document(&json!([{"a": 1}]), &[], &[]).unwrap().1,
            None
        );
        assert_eq!(sorted::to_document(&json!("s"), &[], &[]).unwrap().1, None);
        // Nor is a variant's object the document's top level.
        #[derive(serde::Serialize)]
        enum Kind {
            Struct { a: u8 },
        }
        let (text, fields) = sorted::to_document(&Kind::Struct { a: 1 }, &[], &[]).unwrap();
        assert_eq!((text.as_str(), fields), (r#"{"Struct":{"a":1}}"#, None));
    }

    #[test]
    fn splicing_gives_the_text_of_the_changed_object() {
        let base = json!({"b": 1, "d": {"x": [1, 2]}, "f": "s"});
        let (text, fields) = written(&base);
        type Case<'a> = (Vec<(&'a str, Option<&'a str>)>, serde_json::Value);
        let cases: Vec<Case> = vec![
            (vec![], base.clone()),
            (
                vec![("b", Some("2"))],
                json!({"b": 2, "d": {"x": [1, 2]}, "f": "s"}),
            ),
            (
                vec![("a", Some("0")), ("c", Some("[]")), ("g", Some("null"))],
                json!({"a": 0, "b": 1, "c": [], "d": {"x": [1, 2]}, "f": "s", "g": null}),
            ),
            (vec![("b", None), ("f", None)], json!({"d": {"x": [1, 2]}})),
            (vec![("b", None), ("d", None), ("f", None)], json!({})),
            (
                vec![("e", None), ("f", Some("\"t\""))],
                json!({"b": 1, "d": {"x": [1, 2]}, "f": "t"}),
            ),
            (
                vec![("quote\"d", Some("1"))],
                json!({"b": 1, "d": {"x": [1, 2]}, "f": "s", "quote\"d": 1}),
            ),
        ];
        for (changes, expected) in cases {
            let (spliced, spliced_fields) = fields.splice(&text, &changes).unwrap();
            assert_eq!(spliced, written(&expected).0, "{changes:?}");
            // The new spans describe the new text: splicing it again changes nothing.
            assert_eq!(spliced_fields, written(&expected).1, "{changes:?}");
            // Splicing it again changes nothing (unless a key needs an escape: refused).
            let again = spliced_fields.splice(&spliced, &[]);
            assert_eq!(
                again.map(|(text, _)| text),
                (!spliced.contains('\\')).then_some(spliced)
            );
        }
    }

    #[test]
    fn what_cannot_be_spliced_is_refused() {
        let (text, fields) = written(&json!({"a": 1, "b": 2}));
        // Out of order.
        assert!(fields.splice(&text, &[("b", None), ("a", None)]).is_none());
        // Spans that do not fit the text.
        assert!(fields.splice("{}", &[]).is_none());
        // An escaped key: its order cannot be told from its text.
        let (text, fields) = written(&json!({"a\"b": 1}));
        assert!(fields.splice(&text, &[("c", Some("1"))]).is_none());
    }
}
