//! A string map's JSON text in key order, kept with where each entry lies, so that the
//! text after a few changes is a copy with those entries spliced in.
//!
//! Why: tables and views keep their properties in hash maps, and a metadata document
//! writes them sorted. A commit used to sort and write every property again, though it
//! changes one or two: in Polaris's benchmark, which adds a property per update, a view's
//! document is nine tenths properties (hundreds of them), and sorting and writing them
//! was most of a view commit's CPU. A commit that starts from the text its base was
//! written with (`catalog::parsed` keeps it beside the model) copies it instead.
//!
//! The text is exactly what `json_text::sorted` (and serde_json through a `Value`) writes
//! for the same map: compact, keys in byte order. Only maps none of whose keys and values
//! needs an escape are kept this way (nearly all of them); for the others there is no
//! `MapText` and the document is written as before.

use std::collections::HashMap;

/// A map's JSON text, keys in order, and each entry's place in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapText {
    text: String,
    /// Each entry's `"key":"value"` in `text`, in key order.
    entries: Vec<Span>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    /// The entry's opening quote.
    start: usize,
    /// Just past the value's closing quote.
    end: usize,
    key_len: usize,
}

impl Span {
    fn key<'a>(&self, text: &'a str) -> &'a str {
        &text[self.start + 1..self.start + 1 + self.key_len]
    }
}

/// Whether `text` is written as it is between quotes.
fn plain(text: &str) -> bool {
    !super::needs_escape(text)
}

impl MapText {
    /// `map`'s text; `None` when a key or value needs an escape.
    pub fn new(map: &HashMap<String, String>) -> Option<MapText> {
        let mut entries: Vec<(&str, &str)> =
            map.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        if !entries.iter().all(|(k, v)| plain(k) && plain(v)) {
            return None;
        }
        // A map's keys are distinct, so an unstable sort gives the one order.
        entries.sort_unstable_by(|x, y| x.0.cmp(y.0));
        let len = entries.iter().map(|(k, v)| k.len() + v.len() + 6).sum();
        let mut out = Builder::with_capacity(len, entries.len());
        for (key, value) in entries {
            out.entry(key, value);
        }
        Some(out.finish())
    }

    /// The text of `map`, which is this text's map with the keys in `changed` set to their
    /// values in `map` or, absent from it, removed. `None` when a changed entry needs an
    /// escape, or when `map` holds other changes than these (its size tells).
    pub fn changed<'k>(
        &self,
        map: &HashMap<String, String>,
        changed: impl IntoIterator<Item = &'k str>,
    ) -> Option<MapText> {
        let mut changed: Vec<&str> = changed.into_iter().collect();
        changed.sort_unstable();
        changed.dedup();
        let mut out = Builder::with_capacity(self.text.len() + 64, self.entries.len() + 1);
        // The old entries not yet copied start here.
        let mut next = 0;
        for key in changed {
            let text = &self.text;
            let before = next + self.entries[next..].partition_point(|e| e.key(text) < key);
            out.copy(&self.text, &self.entries[next..before]);
            next = before;
            if self.entries.get(next).is_some_and(|e| e.key(text) == key) {
                // Replaced or removed.
                next += 1;
            }
            if let Some(value) = map.get(key) {
                if !plain(key) || !plain(value) {
                    return None;
                }
                out.entry(key, value);
            }
        }
        out.copy(&self.text, &self.entries[next..]);
        let text = out.finish();
        (text.entries.len() == map.len()).then_some(text)
    }

    /// The JSON text (`{...}`).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Bytes held (for caches' budgets).
    pub fn size(&self) -> usize {
        self.text.capacity() + self.entries.capacity() * std::mem::size_of::<Span>()
    }
}

/// Writes a `MapText` entry by entry, in key order.
struct Builder {
    text: String,
    entries: Vec<Span>,
}

impl Builder {
    fn with_capacity(text: usize, entries: usize) -> Self {
        let mut builder = Builder {
            text: String::with_capacity(text + 2),
            entries: Vec::with_capacity(entries),
        };
        builder.text.push('{');
        builder
    }

    fn comma(&mut self) {
        if !self.entries.is_empty() {
            self.text.push(',');
        }
    }

    /// A new entry (neither side needs an escape).
    fn entry(&mut self, key: &str, value: &str) {
        self.comma();
        let start = self.text.len();
        for part in ["\"", key, "\":\"", value, "\""] {
            self.text.push_str(part);
        }
        self.entries.push(Span {
            start,
            end: self.text.len(),
            key_len: key.len(),
        });
    }

    /// Consecutive entries of `from`'s text, copied at once (with the commas between).
    fn copy(&mut self, from: &str, run: &[Span]) {
        let (Some(first), Some(last)) = (run.first(), run.last()) else {
            return;
        };
        self.comma();
        let start = self.text.len();
        self.text.push_str(&from[first.start..last.end]);
        // Every span moves by the same amount.
        let shift = start as isize - first.start as isize;
        self.entries.extend(run.iter().map(|s| Span {
            start: (s.start as isize + shift) as usize,
            end: (s.end as isize + shift) as usize,
            key_len: s.key_len,
        }));
    }

    fn finish(mut self) -> MapText {
        self.text.push('}');
        MapText {
            text: self.text,
            entries: self.entries,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    /// What `json_text::sorted` (and serde_json through a sorted map) writes.
    fn expected(map: &HashMap<String, String>) -> String {
        serde_json::to_string(&map.iter().collect::<BTreeMap<_, _>>()).unwrap()
    }

    fn map(entries: &[(&str, &str)]) -> HashMap<String, String> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_map_is_written_as_serde_json_writes_it_sorted() {
        for m in [
            map(&[]),
            map(&[("", "")]),
            map(&[("b", "2"), ("a", "1"), ("ab", ""), ("é", "ü"), ("B", "x")]),
        ] {
            assert_eq!(MapText::new(&m).unwrap().as_str(), expected(&m));
        }
    }

    #[test]
    fn a_map_needing_an_escape_has_no_text() {
        for (k, v) in [("a\"", "1"), ("a", "\\"), ("\n", "1"), ("a", "\u{1f}")] {
            let m = map(&[("x", "y"), (k, v)]);
            assert_eq!(MapText::new(&m), None, "{k:?} {v:?}");
            let base = MapText::new(&map(&[("x", "y")])).unwrap();
            assert_eq!(base.changed(&m, [k]), None, "{k:?} {v:?}");
        }
    }

    #[test]
    fn changes_give_the_text_of_the_changed_map() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let keys: Vec<String> = (0..40).map(|i| format!("k{}", i * 7 % 40)).collect();
        for round in 0..2_000 {
            let size = rng.random_range(0..12);
            let mut before = HashMap::new();
            for _ in 0..size {
                let key = keys[rng.random_range(0..keys.len())].clone();
                before.insert(key, format!("v{}", rng.random_range(0..5)));
            }
            let base = MapText::new(&before).unwrap();
            let mut after = before.clone();
            let mut changed = Vec::new();
            for _ in 0..rng.random_range(0..5) {
                let key = keys[rng.random_range(0..keys.len())].clone();
                match rng.random_range(0..3) {
                    0 => {
                        after.remove(&key);
                    }
                    1 => {
                        after.insert(key.clone(), format!("w{}", rng.random_range(0..5)));
                    }
                    // Named as changed, left as it was.
                    _ => {}
                }
                changed.push(key);
            }
            let text = base
                .changed(&after, changed.iter().map(String::as_str))
                .unwrap_or_else(|| panic!("round {round}: {before:?} -> {after:?}"));
            assert_eq!(text.as_str(), expected(&after), "round {round}");
            // And the result changes again as a new text would.
            assert_eq!(text.entries, MapText::new(&after).unwrap().entries);
        }
    }

    #[test]
    fn a_change_not_named_is_noticed_when_it_changes_the_size() {
        let before = map(&[("a", "1"), ("b", "2")]);
        let base = MapText::new(&before).unwrap();
        let after = map(&[("a", "1"), ("b", "2"), ("c", "3")]);
        assert_eq!(base.changed(&after, []), None);
        assert_eq!(
            base.changed(&after, ["c"]).unwrap().as_str(),
            expected(&after)
        );
    }
}
