//! What the load generator reads from a response body to check it, read straight from the
//! text: the few fields a check needs, borrowed where they need no unescaping, the rest
//! skipped.
//!
//! Why: the checks used to parse the whole body into a `serde_json::Value`. A loaded
//! table in Polaris's benchmark is a 30 KB document with hundreds of properties, so that
//! tree (thousands of allocations) was about 30% of the tool's CPU in the 50/50 mix, CPU
//! the server under test shares when both run on one machine (BENCHMARKS.md, "Documents
//! spliced from their base").

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// The prefix of the properties the dataset writes: `InitialAttribute_<i>` = `"<i>"`.
const INITIAL: &str = "InitialAttribute_";

/// A loaded table's or view's response (`LoadTableResult`, `LoadViewResult`).
#[derive(Deserialize)]
pub(super) struct LoadedBody<'a> {
    #[serde(borrow, default)]
    pub metadata: Option<Loaded<'a>>,
}

/// What the checks read of a loaded table's or view's metadata.
#[derive(Deserialize)]
pub(super) struct Loaded<'a> {
    #[serde(rename = "table-uuid", borrow, default)]
    pub table_uuid: Text<'a>,
    #[serde(rename = "view-uuid", borrow, default)]
    pub view_uuid: Text<'a>,
    #[serde(borrow, default)]
    pub location: Text<'a>,
    #[serde(default)]
    pub properties: Initial,
}

/// A namespace's response (`GetNamespaceResponse`, `CreateNamespaceResponse`).
#[derive(Deserialize)]
pub(super) struct NamespaceBody<'a> {
    #[serde(borrow, default)]
    pub namespace: Levels<'a>,
    #[serde(default)]
    pub properties: Initial,
}

/// A field's value if it is a string (`None`: absent, or another kind of value).
#[derive(Default)]
pub(super) struct Text<'a>(pub Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TextVisitor)
    }
}

struct TextVisitor;

/// A visitor's methods for the kinds of value it does not read: each gives `$default`,
/// after skipping the value (`str`, `seq` and `map` name the non-scalar kinds to skip).
macro_rules! skip {
    ($default:expr $(, $kind:ident)*) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($default)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($default)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($default)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($default)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($default)
        }
        $(skip!(@ $kind $default);)*
    };
    (@ str $default:expr) => {
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok($default)
        }
    };
    (@ seq $default:expr) => {
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok($default)
        }
    };
    (@ map $default:expr) => {
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok($default)
        }
    };
}

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'de>, E> {
        Ok(Text(Some(Cow::Borrowed(v))))
    }

    fn visit_str<E>(self, v: &str) -> Result<Text<'de>, E> {
        Ok(Text(Some(Cow::Owned(v.to_string()))))
    }

    skip!(Text(None), seq, map);
}

/// A namespace's levels if it is an array of strings (`None`: absent or otherwise).
#[derive(Default)]
pub(super) struct Levels<'a>(pub Option<Vec<Cow<'a, str>>>);

impl Levels<'_> {
    pub fn equal(&self, levels: &[String]) -> bool {
        self.0.as_ref().is_some_and(|got| {
            got.len() == levels.len() && got.iter().zip(levels).all(|(g, l)| g == l)
        })
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Levels<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct LevelsVisitor;
        impl<'de> Visitor<'de> for LevelsVisitor {
            type Value = Levels<'de>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Levels<'de>, A::Error> {
                let mut levels = Some(Vec::new());
                while let Some(Text(level)) = seq.next_element::<Text>()? {
                    match (level, levels.as_mut()) {
                        (Some(level), Some(all)) => all.push(level),
                        // Not a string: keep skipping the rest.
                        _ => levels = None,
                    }
                }
                Ok(Levels(levels))
            }

            skip!(Levels(None), str, map);
        }
        d.deserialize_any(LevelsVisitor)
    }
}

/// The `InitialAttribute_*` entries of a properties map, each read as it goes by: its
/// index (`None`: not a number) and whether its value is that index's text.
#[derive(Default)]
pub(super) struct Initial {
    /// The properties were an object.
    object: bool,
    entries: Vec<(Option<usize>, bool)>,
}

impl Initial {
    /// Whether the `InitialAttribute_*` properties are exactly `InitialAttribute_i = "i"`
    /// for every i below `count`.
    pub fn matches(&self, count: usize) -> bool {
        if !self.object {
            return count == 0;
        }
        self.entries.len() == count
            && self
                .entries
                .iter()
                .all(|(i, value_ok)| *value_ok && i.is_some_and(|i| i < count))
    }
}

impl<'de> Deserialize<'de> for Initial {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct InitialVisitor;
        impl<'de> Visitor<'de> for InitialVisitor {
            type Value = Initial;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Initial, A::Error> {
                let mut initial = Initial {
                    object: true,
                    entries: Vec::new(),
                };
                while let Some(Text(key)) = map.next_key::<Text>()? {
                    let Some(i) = key.as_deref().and_then(|k| k.strip_prefix(INITIAL)) else {
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    };
                    let Text(value) = map.next_value::<Text>()?;
                    initial
                        .entries
                        .push((i.parse().ok(), value.as_deref() == Some(i)));
                }
                Ok(initial)
            }

            skip!(Initial::default(), str, seq);
        }
        d.deserialize_any(InitialVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn initial(text: &str) -> Initial {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn initial_properties_must_be_exactly_the_written_ones() {
        let written =
            initial(r#"{"InitialAttribute_0": "0", "InitialAttribute_1": "1", "x": "y"}"#);
        assert!(written.matches(2));
        assert!(!written.matches(3));
        assert!(!written.matches(1));
        assert!(!initial(r#"{"InitialAttribute_0": "1"}"#).matches(1));
        assert!(!initial(r#"{"InitialAttribute_0": 0}"#).matches(1));
        assert!(!initial(r#"{"InitialAttribute_x": "x"}"#).matches(1));
        assert!(initial("{}").matches(0));
        // Not a map: only none are expected.
        assert!(initial("null").matches(0));
        assert!(!initial("[1]").matches(1));
        // An escaped key is read too.
        assert!(initial(r#"{"Initial\u0041ttribute_0": "0", "a\"b": {"c": [1]}}"#).matches(1));
    }

    #[test]
    fn loaded_and_namespace_fields_are_read_whatever_else_the_body_holds() {
        let body = r#"{"metadata-location": "x", "metadata": {"format-version": 2,
            "table-uuid": "u", "location": "file:///t", "schemas": [{"fields": []}],
            "properties": {"InitialAttribute_0": "0", "p": "q"}}, "config": {}}"#;
        let loaded: LoadedBody = serde_json::from_str(body).unwrap();
        let metadata = loaded.metadata.unwrap();
        assert_eq!(metadata.table_uuid.0.as_deref(), Some("u"));
        assert!(metadata.view_uuid.0.is_none());
        assert_eq!(metadata.location.0.as_deref(), Some("file:///t"));
        assert!(metadata.properties.matches(1));
        // A uuid that is not a string is no uuid.
        let loaded: LoadedBody =
            serde_json::from_str(r#"{"metadata": {"table-uuid": 1}}"#).unwrap();
        assert!(loaded.metadata.unwrap().table_uuid.0.is_none());
        assert!(serde_json::from_str::<LoadedBody>("{}")
            .unwrap()
            .metadata
            .is_none());

        let levels = ["a".to_string(), "b\"c".to_string()];
        let ns: NamespaceBody =
            serde_json::from_str(r#"{"namespace": ["a", "b\"c"], "properties": {}}"#).unwrap();
        assert!(ns.namespace.equal(&levels));
        assert!(ns.properties.matches(0));
        for other in [
            r#"{"namespace": ["a"]}"#,
            r#"{"namespace": ["a", 1]}"#,
            r#"{"namespace": "a"}"#,
            "{}",
        ] {
            let ns: NamespaceBody = serde_json::from_str(other).unwrap();
            assert!(!ns.namespace.equal(&levels), "{other}");
        }
    }
}
