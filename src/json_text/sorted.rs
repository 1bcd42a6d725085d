//! JSON text with every object's keys in order, written straight from `Serialize`: the
//! text `serde_json::to_value` and then writing the `Value` gives (its maps are sorted),
//! without building the `Value`.
//!
//! Why: metadata documents must come out the same for the same state, and iceberg-rust
//! keeps properties, refs and snapshots in hash maps. Going through a `Value` sorted them,
//! but building, writing and dropping that tree cost more than the text itself
//! (BENCHMARKS.md, "Documents without a Value").
//!
//! How: every value is written to the end of one buffer as it is serialised, as JSON.
//! An object notes where each entry landed and its key as it is (on stacks shared by the
//! whole document, so a small object allocates nothing). If its keys came in order, as
//! most structs' and logs' do, nothing moves; otherwise its entries are rewritten in key
//! order when it ends, a later duplicate key winning as in a map. The arrays the caller
//! names at the top level are put in order the same way, by integer fields of their
//! elements, read back from the written text.

use serde::ser::{self, Error as _, Impossible, Serialize};
use serde_json::Error;

use super::fields::Fields;
use super::push_str;

/// For a top-level array of objects: its key, and the fields its elements are ordered
/// by (stably; a missing or non-integer field counts as 0).
pub type ListOrder<'a> = (&'a str, &'a [&'a str]);

/// For a top-level field: its key, and the JSON text written for its value instead of
/// serialising it (which the caller vouches is the text it would give).
pub type RawField<'a> = (&'a str, &'a str);

/// `value` as JSON text, objects' keys sorted, the top-level `lists` ordered.
pub fn to_string<T: Serialize + ?Sized>(value: &T, lists: &[ListOrder]) -> Result<String, Error> {
    to_string_with(value, lists, &[])
}

/// As [`to_string`], with the values of the top-level fields `raw` names written as the
/// text it gives.
pub fn to_string_with<T: Serialize + ?Sized>(
    value: &T,
    lists: &[ListOrder],
    raw: &[RawField],
) -> Result<String, Error> {
    to_document(value, lists, raw).map(|(text, _)| text)
}

/// As [`to_string_with`], and where the top-level object's fields lie in the text (`None`
/// when the value is not an object, or the text is over 4 GiB).
pub fn to_document<T: Serialize + ?Sized>(
    value: &T,
    lists: &[ListOrder],
    raw: &[RawField],
) -> Result<(String, Option<Fields>), Error> {
    let mut buffers = Buffers {
        out: Vec::with_capacity(16 * 1024),
        keys: String::new(),
        entries: Vec::new(),
        scratch: Vec::new(),
        fields: Fields::default(),
        closed: false,
    };
    value.serialize(Writer {
        b: &mut buffers,
        lists,
        raw,
        order_by: None,
        top: true,
    })?;
    let text = String::from_utf8(buffers.out).expect("JSON text is UTF-8");
    // Every span fits when the whole text does.
    let fits = u32::try_from(text.len()).is_ok();
    Ok((text, (buffers.closed && fits).then_some(buffers.fields)))
}

/// The text, and the stacks every open object keeps its entries on.
struct Buffers {
    out: Vec<u8>,
    /// The keys of the open objects' entries, as they are.
    keys: String,
    entries: Vec<Entry>,
    /// Where an object's text is copied while its entries are put in order.
    scratch: Vec<u8>,
    /// The top-level object's fields, noted when it closes.
    fields: Fields,
    /// Whether the top-level value was an object, and has closed.
    closed: bool,
}

impl Buffers {
    /// `{"variant":`, the opening of a tuple or struct variant (closed by `Variant`).
    fn open_variant(&mut self, variant: &str) {
        self.out.push(b'{');
        push_str(&mut self.out, variant);
        self.out.push(b':');
    }
}

/// Where one entry of an object was written.
struct Entry {
    /// The key as it is, in `Buffers::keys`.
    key: (usize, usize),
    /// The entry's text (`"key":value`) in `Buffers::out`.
    text: (usize, usize),
    /// Where its value starts in `Buffers::out`.
    value: usize,
}

struct Writer<'a, 'l> {
    b: &'a mut Buffers,
    /// The list orders, at the top level only.
    lists: &'l [ListOrder<'l>],
    /// The fields written as given, at the top level only.
    raw: &'l [RawField<'l>],
    /// This value, an array, is ordered by these fields.
    order_by: Option<&'l [&'l str]>,
    /// This value is the document itself (an object's fields are then noted).
    top: bool,
}

impl<'a, 'l> Writer<'a, 'l> {
    fn literal(self, text: &str) -> Result<(), Error> {
        self.b.out.extend_from_slice(text.as_bytes());
        Ok(())
    }

    fn object(self) -> Object<'a, 'l> {
        self.b.out.push(b'{');
        Object {
            start: self.b.out.len(),
            first_entry: self.b.entries.len(),
            keys_start: self.b.keys.len(),
            in_order: true,
            top: self.top,
            b: self.b,
            lists: self.lists,
            raw: self.raw,
        }
    }
}

struct Object<'a, 'l> {
    b: &'a mut Buffers,
    lists: &'l [ListOrder<'l>],
    raw: &'l [RawField<'l>],
    /// Just past the `{`.
    start: usize,
    /// This object's first entry and key on the shared stacks.
    first_entry: usize,
    keys_start: usize,
    /// Every key so far greater than the one before.
    in_order: bool,
    /// The document itself: its fields are noted in `Buffers::fields`.
    top: bool,
}

impl<'a> Object<'a, '_> {
    fn key(&mut self, key: &str) {
        let b = &mut *self.b;
        if b.entries.len() > self.first_entry {
            b.out.push(b',');
            let previous = b.entries.last().expect("an entry").key;
            self.in_order &= b.keys[previous.0..previous.1] < *key;
        }
        let at = b.keys.len();
        b.keys.push_str(key);
        let text = b.out.len();
        push_str(&mut b.out, key);
        b.out.push(b':');
        b.entries.push(Entry {
            key: (at, b.keys.len()),
            text: (text, 0),
            value: b.out.len(),
        });
    }

    fn value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        let index = self.b.entries.len() - 1;
        let key = self.b.entries[index].key;
        let key_text = &self.b.keys[key.0..key.1];
        if let Some((_, text)) = self.raw.iter().find(|(field, _)| *field == key_text) {
            self.b.out.extend_from_slice(text.as_bytes());
            self.b.entries[index].text.1 = self.b.out.len();
            return Ok(());
        }
        let order_by = self
            .lists
            .iter()
            .find(|(list, _)| *list == &self.b.keys[key.0..key.1])
            .map(|(_, fields)| *fields);
        value.serialize(Writer {
            b: &mut *self.b,
            lists: &[],
            raw: &[],
            order_by,
            top: false,
        })?;
        self.b.entries[index].text.1 = self.b.out.len();
        Ok(())
    }

    /// Puts the entries in key order if they came otherwise, and closes the object;
    /// gives the buffers back.
    fn finish(self) -> Result<&'a mut Buffers, Error> {
        let b = self.b;
        if !self.in_order {
            let Buffers {
                out,
                keys,
                entries,
                scratch,
                fields,
                closed: _,
            } = &mut *b;
            let entries = &mut entries[self.first_entry..];
            // Stable: among equal keys the last written stays last, and wins below.
            entries.sort_by(|x, y| keys[x.key.0..x.key.1].cmp(&keys[y.key.0..y.key.1]));
            scratch.clear();
            scratch.extend_from_slice(&out[self.start..]);
            out.truncate(self.start);
            let mut first = true;
            for (i, entry) in entries.iter().enumerate() {
                let key = &keys[entry.key.0..entry.key.1];
                if entries
                    .get(i + 1)
                    .is_some_and(|next| &keys[next.key.0..next.key.1] == key)
                {
                    continue;
                }
                if !first {
                    out.push(b',');
                }
                first = false;
                let at = out.len();
                out.extend_from_slice(
                    &scratch[entry.text.0 - self.start..entry.text.1 - self.start],
                );
                if self.top {
                    note(fields, entry, at);
                }
            }
        } else if self.top {
            for entry in &b.entries[self.first_entry..] {
                note(&mut b.fields, entry, entry.text.0);
            }
        }
        b.closed |= self.top;
        b.out.push(b'}');
        b.entries.truncate(self.first_entry);
        b.keys.truncate(self.keys_start);
        Ok(b)
    }
}

/// Notes a top-level entry, its text now starting at `at`.
fn note(fields: &mut Fields, entry: &Entry, at: usize) {
    let (start, end) = entry.text;
    let value = entry.value - start + at;
    // `"key":` comes before the value. A span past 4 GiB is not noted, and `to_document`
    // then gives no fields at all.
    let _ = fields.push(at + 1..value - 2, value..end - start + at);
}

struct Array<'a, 'l> {
    b: &'a mut Buffers,
    order_by: Option<&'l [&'l str]>,
    /// Where each element was written, when the array is to be ordered.
    items: Vec<(usize, usize)>,
    first: bool,
}

impl<'a> Array<'a, '_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        if !self.first {
            self.b.out.push(b',');
        }
        self.first = false;
        let start = self.b.out.len();
        value.serialize(Writer {
            b: &mut *self.b,
            lists: &[],
            raw: &[],
            order_by: None,
            top: false,
        })?;
        if self.order_by.is_some() {
            self.items.push((start, self.b.out.len()));
        }
        Ok(())
    }

    /// Closes the array (in order, if it is to be ordered); gives the buffers back.
    fn finish(self) -> Result<&'a mut Buffers, Error> {
        let b = self.b;
        let Some(fields) = self.order_by.filter(|_| self.items.len() > 1) else {
            b.out.push(b']');
            return Ok(b);
        };
        let start = self.items[0].0;
        let written = b.out.split_off(start);
        let mut items: Vec<(Vec<i64>, &[u8])> = self
            .items
            .iter()
            .map(|&(from, to)| {
                let text = &written[from - start..to - start];
                Ok((order_key(text, fields)?, text))
            })
            .collect::<Result<_, Error>>()?;
        items.sort_by(|x, y| x.0.cmp(&y.0));
        for (i, (_, text)) in items.iter().enumerate() {
            if i > 0 {
                b.out.push(b',');
            }
            b.out.extend_from_slice(text);
        }
        b.out.push(b']');
        Ok(b)
    }
}

/// The integer `fields` of an element's text (0 for one missing or not an integer), read
/// without building it.
fn order_key(text: &[u8], fields: &[&str]) -> Result<Vec<i64>, Error> {
    use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
    struct Fields<'f>(&'f [&'f str]);
    impl<'de> Visitor<'de> for Fields<'_> {
        type Value = Vec<i64>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<i64>, A::Error> {
            let mut found = vec![0; self.0.len()];
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                match self.0.iter().position(|f| *f == key) {
                    Some(i) => {
                        let value: serde_json::Value = map.next_value()?;
                        found[i] = value.as_i64().unwrap_or(0);
                    }
                    None => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(found)
        }
    }
    impl<'de> DeserializeSeed<'de> for Fields<'_> {
        type Value = Vec<i64>;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Vec<i64>, D::Error> {
            d.deserialize_any(self)
        }
    }
    if text.first() != Some(&b'{') {
        // Not an object: every field missing.
        return Ok(vec![0; fields.len()]);
    }
    let mut de = serde_json::Deserializer::from_slice(text);
    Fields(fields).deserialize(&mut de)
}

macro_rules! integers {
    ($($method:ident: $t:ty),*) => {$(
        fn $method(self, v: $t) -> Result<(), Error> {
            self.literal(itoa::Buffer::new().format(v))
        }
    )*};
}

impl<'a, 'l> ser::Serializer for Writer<'a, 'l> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Array<'a, 'l>;
    type SerializeTuple = Array<'a, 'l>;
    type SerializeTupleStruct = Array<'a, 'l>;
    type SerializeTupleVariant = Variant<Array<'a, 'l>>;
    type SerializeMap = Object<'a, 'l>;
    type SerializeStruct = Object<'a, 'l>;
    type SerializeStructVariant = Variant<Object<'a, 'l>>;

    integers!(serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
              serialize_u8: u8, serialize_u16: u16, serialize_u32: u32, serialize_u64: u64);

    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        // As serde_json's Value: only what fits 64 bits.
        match (i64::try_from(v), u64::try_from(v)) {
            (Ok(v), _) => self.serialize_i64(v),
            (_, Ok(v)) => self.serialize_u64(v),
            _ => Err(Error::custom("number out of range")),
        }
    }

    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        match u64::try_from(v) {
            Ok(v) => self.serialize_u64(v),
            Err(_) => Err(Error::custom("number out of range")),
        }
    }

    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        // A Value keeps an f32 as the f64 it converts to.
        self.serialize_f64(f64::from(v))
    }

    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        // serde_json writes a non-finite float, as its Value keeps it, as null.
        serde_json::to_writer(&mut self.b.out, &v)
    }

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.literal(if v { "true" } else { "false" })
    }

    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        push_str(&mut self.b.out, v);
        Ok(())
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        use ser::SerializeSeq;
        let mut array = self.serialize_seq(Some(v.len()))?;
        for byte in v {
            array.serialize_element(byte)?;
        }
        array.end()
    }

    fn serialize_none(self) -> Result<(), Error> {
        self.literal("null")
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Error> {
        self.literal("null")
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        self.literal("null")
    }

    fn serialize_unit_variant(self, _: &'static str, _: u32, v: &'static str) -> Result<(), Error> {
        self.serialize_str(v)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        let mut object = self.object();
        object.key(variant);
        object.value(value)?;
        object.finish().map(drop)
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Array<'a, 'l>, Error> {
        self.b.out.push(b'[');
        Ok(Array {
            b: self.b,
            order_by: self.order_by,
            items: Vec::new(),
            first: true,
        })
    }

    fn serialize_tuple(self, len: usize) -> Result<Array<'a, 'l>, Error> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Array<'a, 'l>, Error> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Variant<Array<'a, 'l>>, Error> {
        self.b.open_variant(variant);
        self.serialize_seq(None).map(Variant)
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Object<'a, 'l>, Error> {
        Ok(self.object())
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Object<'a, 'l>, Error> {
        Ok(self.object())
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Variant<Object<'a, 'l>>, Error> {
        self.b.open_variant(variant);
        // The object inside `{"variant":...}` is not the document's top level: its fields
        // are not the document's, and a document that is a variant has none.
        let inner = Writer { top: false, ..self };
        Ok(Variant(inner.object()))
    }
}

/// A tuple or struct variant: `{"variant": ...}`, the opening written already.
struct Variant<T>(T);

impl ser::SerializeTupleVariant for Variant<Array<'_, '_>> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.0.element(value)
    }
    fn end(self) -> Result<(), Error> {
        self.0.finish()?.out.push(b'}');
        Ok(())
    }
}

impl ser::SerializeStructVariant for Variant<Object<'_, '_>> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.0.key(key);
        self.0.value(value)
    }
    fn end(self) -> Result<(), Error> {
        self.0.finish()?.out.push(b'}');
        Ok(())
    }
}

macro_rules! array_like {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Array<'_, '_> {
            type Ok = ();
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.element(value)
            }
            fn end(self) -> Result<(), Error> {
                self.finish().map(drop)
            }
        }
    )*};
}

array_like!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field
);

impl ser::SerializeMap for Object<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        let key = key.serialize(KeyText)?;
        self.key(&key);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.value(value)
    }
    fn end(self) -> Result<(), Error> {
        self.finish().map(drop)
    }
}

impl ser::SerializeStruct for Object<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.key(key);
        self.value(value)
    }
    fn end(self) -> Result<(), Error> {
        self.finish().map(drop)
    }
}

/// A map key as the string a `Value`'s map would hold (as serde_json's key serializer).
struct KeyText;

fn key_error() -> Error {
    Error::custom("key must be a string")
}

macro_rules! integer_keys {
    ($($method:ident: $t:ty),*) => {$(
        fn $method(self, v: $t) -> Result<String, Error> {
            Ok(itoa::Buffer::new().format(v).to_string())
        }
    )*};
}

impl ser::Serializer for KeyText {
    type Ok = String;
    type Error = Error;
    type SerializeSeq = Impossible<String, Error>;
    type SerializeTuple = Impossible<String, Error>;
    type SerializeTupleStruct = Impossible<String, Error>;
    type SerializeTupleVariant = Impossible<String, Error>;
    type SerializeMap = Impossible<String, Error>;
    type SerializeStruct = Impossible<String, Error>;
    type SerializeStructVariant = Impossible<String, Error>;

    integer_keys!(serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
                  serialize_u8: u8, serialize_u16: u16, serialize_u32: u32, serialize_u64: u64,
                  serialize_i128: i128, serialize_u128: u128);

    fn serialize_str(self, v: &str) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_char(self, v: char) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_bool(self, v: bool) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        v: &'static str,
    ) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<String, Error> {
        value.serialize(self)
    }
    fn serialize_f32(self, _: f32) -> Result<String, Error> {
        Err(key_error())
    }
    fn serialize_f64(self, _: f64) -> Result<String, Error> {
        Err(key_error())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<String, Error> {
        Err(key_error())
    }
    fn serialize_none(self) -> Result<String, Error> {
        Err(key_error())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<String, Error> {
        Err(key_error())
    }
    fn serialize_unit(self) -> Result<String, Error> {
        Err(key_error())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<String, Error> {
        Err(key_error())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String, Error> {
        Err(key_error())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_error())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_error())
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_error())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_error())
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_error())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Error> {
        Err(key_error())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_error())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde::Serialize;
    use serde_json::{json, Value};

    use super::*;

    /// The text the `Value` path gives: maps sorted by `to_value`, then the lists sorted.
    fn via_value<T: Serialize>(value: &T, lists: &[ListOrder]) -> String {
        let mut doc = serde_json::to_value(value).unwrap();
        if let Some(object) = doc.as_object_mut() {
            for (list, fields) in lists {
                if let Some(Value::Array(items)) = object.get_mut(*list) {
                    items.sort_by_key(|item| {
                        fields
                            .iter()
                            .map(|k| item.get(*k).and_then(Value::as_i64).unwrap_or(0))
                            .collect::<Vec<i64>>()
                    });
                }
            }
        }
        crate::json_text::to_string(&doc)
    }

    #[derive(Serialize)]
    #[serde(rename_all = "kebab-case")]
    enum Kind {
        Unit,
        Newtype(u8),
        Tuple(i32, String),
        Struct { z: bool, a: Option<f32> },
    }

    #[derive(Serialize)]
    struct Inner {
        operation: &'static str,
        #[serde(flatten)]
        more: HashMap<String, String>,
    }

    #[derive(Serialize)]
    #[serde(rename_all = "kebab-case")]
    struct Doc {
        zeta: i128,
        alpha: u128,
        kinds: Vec<Kind>,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
        bytes: serde_bytes_like::Bytes,
        floats: (f32, f64, f64, f64),
        chars: char,
        unit: (),
        ids: BTreeMap<i64, &'static str>,
        #[serde(flatten)]
        inner: Inner,
        snapshots: Vec<Value>,
        nested: Value,
    }

    /// `serialize_bytes`, which derive never calls for a `Vec<u8>`.
    mod serde_bytes_like {
        pub struct Bytes(pub Vec<u8>);
        impl serde::Serialize for Bytes {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(&self.0)
            }
        }
    }

    #[test]
    fn text_is_what_the_value_path_writes() {
        let more: HashMap<String, String> = (0..50)
            .map(|i| (format!("k{}", (i * 7919) % 101), format!("v\"{i}\n")))
            // Also a key the flattened struct writes itself: the map's comes later, wins.
            .chain([("operation".to_string(), "overwritten".to_string())])
            .collect();
        let doc = Doc {
            zeta: -5,
            alpha: 7,
            kinds: vec![
                Kind::Unit,
                Kind::Newtype(3),
                Kind::Tuple(-1, "é".into()),
                Kind::Struct {
                    z: true,
                    a: Some(1.1),
                },
                Kind::Struct { z: false, a: None },
            ],
            skipped: None,
            bytes: serde_bytes_like::Bytes(vec![0, 255, 7]),
            floats: (0.1, 1e300, f64::NAN, -0.0),
            chars: '"',
            unit: (),
            ids: BTreeMap::from([(10, "ten"), (-2, "minus two"), (3, "three")]),
            inner: Inner {
                operation: "append",
                more,
            },
            snapshots: vec![
                json!({"snapshot-id": 3, "sequence-number": 2, "timestamp-ms": 5}),
                json!({"snapshot-id": 1, "sequence-number": 2, "timestamp-ms": 4}),
                json!({"timestamp-ms": 9, "summary": {"b": "1", "a": [1, {"y": 1, "x": 2}]}}),
                json!("not an object"),
                json!({"snapshot-id": "text", "sequence-number": 1, "timestamp-ms": 1}),
                json!({"snapshot-id": 2, "sequence-number": 2, "timestamp-ms": 5}),
            ],
            nested: json!({"snapshots": [{"snapshot-id": 2}, {"snapshot-id": 1}], "b": {}, "a": []}),
        };
        let lists: [ListOrder; 2] = [
            (
                "snapshots",
                &["sequence-number", "timestamp-ms", "snapshot-id"],
            ),
            ("kinds", &["missing"]),
        ];
        assert_eq!(to_string(&doc, &lists).unwrap(), via_value(&doc, &lists));
        assert_eq!(to_string(&doc, &[]).unwrap(), via_value(&doc, &[]));
    }

    #[test]
    fn raw_fields_are_written_as_given_at_the_top_level_only() {
        let doc = json!({"b": {"p": {"y": "1", "x": "2"}}, "p": {"z": "1", "a": "2"}, "a": 1});
        let raw = [("p", "{\"given\":\"1\"}")];
        assert_eq!(
            to_string_with(&doc, &[], &raw).unwrap(),
            r#"{"a":1,"b":{"p":{"x":"2","y":"1"}},"p":{"given":"1"}}"#
        );
        // A raw field the value does not have changes nothing.
        let absent = [("q", "null")];
        assert_eq!(
            to_string_with(&doc, &[], &absent).unwrap(),
            to_string(&doc, &[]).unwrap()
        );
    }

    #[test]
    fn plain_values_are_written_as_serde_json_writes_them() {
        for value in [
            json!(null),
            json!([]),
            json!({}),
            json!([[{}]]),
            json!(u64::MAX),
            json!(i64::MIN),
            json!({"b": [1, {"x\n": "é\"", "a": null}], "a": false, "": [[]]}),
        ] {
            assert_eq!(
                to_string(&value, &[]).unwrap(),
                serde_json::to_string(&value).unwrap()
            );
        }
    }

    #[test]
    fn what_a_value_cannot_hold_is_an_error() {
        assert!(to_string(&(u128::MAX), &[]).is_err());
        assert!(to_string(&HashMap::from([(vec![1], 1)]), &[]).is_err());
    }
}
