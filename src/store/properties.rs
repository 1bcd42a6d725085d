//! A namespace's properties as a store keeps them: the map, and the JSON text of it that
//! is in the database.
//!
//! Both are kept because both are needed on hot paths. A namespace's load answers with
//! the text as it is, and an update's compare-and-swap expects the text it read. So
//! neither path serialises the map again, and an update that only adds properties
//! appends them to the text. Polaris's benchmark adds a property per update and grows
//! namespaces to hundreds of them; writing those out twice per update and once per load
//! was ~9% of the server's CPU in its 50/50 mix.
//!
//! A store that keeps the text in another form (the embedded store packs large ones) may
//! attach that form ([`StoredProperties::keep_packed`]); an update hands it on with the
//! text it expects, so the swap compares stored bytes with it instead of packing the
//! expected text again (half of the packing a namespace update did, ~2% of the server's
//! CPU in that mix).

use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use super::{from_json, properties_json, StoreResult};
use crate::json_text::push_str;
use crate::model::{Properties, PropertiesChange};

/// Properties with their stored JSON text. The text is always the map's (it parses to
/// exactly the map): it is written from the map ([`StoredProperties::new`]), parsed into
/// it ([`StoredProperties::from_json`]) or changed with it
/// ([`StoredProperties::change`]), and neither can be changed alone. Its keys are in
/// order unless an update appended some; JSON objects have no order.
#[derive(Debug, Clone)]
pub struct StoredProperties {
    map: Properties,
    json: String,
    /// The text in a store's packed form, once a store made or read one. A pure function
    /// of the text, so it stays valid whatever became of the write it was made for.
    packed: OnceLock<Arc<[u8]>>,
}

/// Equal maps and texts: the packed form is a copy of the text, not part of the value.
impl PartialEq for StoredProperties {
    fn eq(&self, other: &Self) -> bool {
        self.map == other.map && self.json == other.json
    }
}

impl Eq for StoredProperties {}

/// The properties text a swap expects to replace, exactly as the store read it, and its
/// packed form if the store attached one ([`StoredProperties::keep_packed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedText {
    pub json: String,
    pub packed: Option<Arc<[u8]>>,
}

impl StoredProperties {
    /// Writes the map's text (compact, as serde_json writes it).
    pub fn new(map: Properties) -> Self {
        let json = properties_json(&map);
        StoredProperties::of(map, json)
    }

    fn of(map: Properties, json: String) -> Self {
        StoredProperties {
            map,
            json,
            packed: OnceLock::new(),
        }
    }

    /// Parses text a store read (text that is not a map is the store's `Internal` error).
    pub fn from_json(json: String) -> StoreResult<Self> {
        let map = from_json(&json)?;
        Ok(StoredProperties::of(map, json))
    }

    /// Removes `removals`, then sets `updates` ([`PropertiesChange::apply`]). Returns
    /// the new properties, the text these had with its packed form (what the swap expects
    /// to replace) and what the change did. When the change only adds keys the map lacks,
    /// the new text is the old one with the new entries appended; otherwise it is written
    /// again. The new properties have no packed form yet.
    pub fn change(
        self,
        removals: &[String],
        updates: &Properties,
    ) -> (StoredProperties, ExpectedText, PropertiesChange) {
        let StoredProperties {
            mut map,
            json,
            packed,
        } = self;
        let packed = packed.into_inner();
        let adds_only = removals.iter().all(|key| !map.contains_key(key))
            && updates.keys().all(|key| !map.contains_key(key))
            && json.ends_with('}');
        let was_empty = map.is_empty();
        let change = PropertiesChange::apply(&mut map, removals, updates);
        if !adds_only {
            return (
                StoredProperties::new(map),
                ExpectedText { json, packed },
                change,
            );
        }
        let added: usize = updates.iter().map(|(k, v)| k.len() + v.len() + 6).sum();
        let mut text = Vec::with_capacity(json.len() + added);
        text.extend_from_slice(&json.as_bytes()[..json.len() - 1]);
        for (i, (key, value)) in updates.iter().enumerate() {
            if i > 0 || !was_empty {
                text.push(b',');
            }
            push_str(&mut text, key);
            text.push(b':');
            push_str(&mut text, value);
        }
        text.push(b'}');
        let text = String::from_utf8(text).expect("JSON text is UTF-8");
        (
            StoredProperties::of(map, text),
            ExpectedText { json, packed },
            change,
        )
    }

    /// The text, as the store holds it.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The text as it is expected by a swap away from these properties.
    pub fn expected(&self) -> ExpectedText {
        ExpectedText {
            json: self.json.clone(),
            packed: self.packed().cloned(),
        }
    }

    /// The packed form a store attached, if any.
    pub fn packed(&self) -> Option<&Arc<[u8]>> {
        self.packed.get()
    }

    /// Attaches the store's packed form of the text: bytes that unpack to exactly
    /// [`StoredProperties::json`] (a second call keeps the first form; both are the text).
    pub fn keep_packed(&self, packed: Arc<[u8]>) {
        let _ = self.packed.set(packed);
    }
}

impl Deref for StoredProperties {
    type Target = Properties;

    fn deref(&self) -> &Properties {
        &self.map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many entries an object's text holds, duplicates included.
    struct Entries(usize);

    impl<'de> serde::Deserialize<'de> for Entries {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Count;
            impl<'de> serde::de::Visitor<'de> for Count {
                type Value = Entries;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut m: A,
                ) -> Result<Entries, A::Error> {
                    let mut n = 0;
                    while m.next_entry::<String, String>()?.is_some() {
                        n += 1;
                    }
                    Ok(Entries(n))
                }
            }
            d.deserialize_map(Count)
        }
    }

    fn map(pairs: &[(&str, &str)]) -> Properties {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn text_and_map_agree_both_ways() {
        let map = map(&[("b", "2"), ("a", "\"1\"")]);
        let written = StoredProperties::new(map.clone());
        assert_eq!(written.json(), serde_json::to_string(&map).unwrap());
        let read = StoredProperties::from_json(written.json().to_string()).unwrap();
        assert_eq!(read, written);
        assert_eq!(*read, map);
        // A packed form is a copy of the text, not part of the value.
        read.keep_packed(Arc::from(&b"packed"[..]));
        assert_eq!(read, written);
        assert_eq!(read.expected().packed.as_deref(), Some(&b"packed"[..]));
        assert_eq!(written.expected().packed, None);
        assert!(StoredProperties::from_json("[1]".into()).is_err());
    }

    /// Every change leaves a text that parses to exactly the new map, whether it was
    /// appended to or written again; and hands back the text it started from.
    #[test]
    fn changed_text_always_parses_to_the_changed_map() {
        type Step<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);
        let steps: &[Step] = &[
            (&[], &[("b", "1")]),                  // to an empty map: appended
            (&[], &[("a", "\"q\""), ("c", "\n")]), // two new keys: appended
            (&["x"], &[("d", "é")]),               // a missing removal only: appended
            (&[], &[("b", "2")]),                  // an existing key: written again
            (&["a"], &[]),                         // a removal: written again
            (&[], &[]),                            // nothing: the same text
            (&["b", "c", "d"], &[]),               // everything removed
            (&[], &[("z", "")]),
        ];
        let mut current = StoredProperties::new(Properties::new());
        let mut expected = Properties::new();
        for (removals, updates) in steps {
            let removals: Vec<String> = removals.iter().map(|k| k.to_string()).collect();
            let updates = map(updates);
            let before = current.json().to_string();
            let want = PropertiesChange::apply(&mut expected, &removals, &updates);
            current.keep_packed(Arc::from(before.as_bytes()));
            let (next, old, change) = current.change(&removals, &updates);
            // The form attached to the old text goes with it, not with the new one.
            assert_eq!(old.json, before);
            assert_eq!(old.packed.as_deref(), Some(before.as_bytes()));
            assert!(next.packed().is_none());
            assert_eq!(change, want);
            assert_eq!(*next, expected);
            let parsed: Properties = serde_json::from_str(next.json()).unwrap();
            assert_eq!(parsed, expected, "{}", next.json());
            // No key twice (a map would keep the last one and hide it).
            let entries: Entries = serde_json::from_str(next.json()).unwrap();
            assert_eq!(entries.0, expected.len());
            current = next;
        }
        // Appended: keys out of order, and not what `new` writes.
        let (appended, _, _) =
            StoredProperties::new(map(&[("b", "1")])).change(&[], &map(&[("a", "2")]));
        assert_eq!(appended.json(), r#"{"b":"1","a":"2"}"#);
    }
}
