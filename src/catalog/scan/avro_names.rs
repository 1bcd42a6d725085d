//! Avro's name rules checked by hand, for the manifests a scan plan parses.
//!
//! apache-avro checks every name in every schema it parses (record names, namespaces,
//! field names, enum symbols) with regex_lite, whose matcher is slow for this. Each
//! manifest carries its own schema, and iceberg-rust parses it (and its reader schema)
//! for every manifest it reads, twice per plan here: in a whole-table plan of 200
//! manifests the regexes took ~8% of the server's CPU (BENCHMARKS.md, "Server-side scan
//! planning"). These validators apply the same grammar: a name is `[A-Za-z_][A-Za-z0-9_]*`
//! (ASCII), a namespace is empty or names joined by dots, a full name is an optional
//! namespace and a dot, then a name. The unit tests compare them with apache-avro's own
//! regexes over every short string of a mixed alphabet.
//!
//! apache-avro takes a validator only before its first schema is parsed, once per
//! process: [`install`] runs before every plan (after the first, it does nothing); should
//! a schema have been parsed before it, apache-avro keeps its own validators, which give
//! the same answers.

use std::sync::Once;

use apache_avro::error::Details;
use apache_avro::validator::{
    set_enum_symbol_name_validator, set_record_field_name_validator, set_schema_name_validator,
    set_schema_namespace_validator, EnumSymbolNameValidator, RecordFieldNameValidator,
    SchemaNameValidator, SchemaNamespaceValidator,
};
use apache_avro::AvroResult;

/// Installs the validators, once per process.
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // An error means apache-avro already settled on its own: same rules, slower.
        let _ = set_schema_name_validator(Box::new(Names));
        let _ = set_schema_namespace_validator(Box::new(Names));
        let _ = set_record_field_name_validator(Box::new(Names));
        let _ = set_enum_symbol_name_validator(Box::new(Names));
    });
}

/// The Avro specification's name rules, without regular expressions.
struct Names;

/// `[A-Za-z_][A-Za-z0-9_]*`
fn is_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Empty, or names joined by single dots.
fn is_namespace(s: &str) -> bool {
    s.is_empty() || s.split('.').all(is_name)
}

impl SchemaNameValidator for Names {
    fn validate(&self, schema_name: &str) -> AvroResult<(String, Option<String>)> {
        let (namespace, name) = match schema_name.rsplit_once('.') {
            Some((namespace, name)) => (Some(namespace), name),
            None => (None, schema_name),
        };
        if is_name(name) && namespace.is_none_or(is_namespace) {
            Ok((name.to_string(), namespace.map(str::to_string)))
        } else {
            let pattern = SchemaNameValidator::regex(self).as_str();
            Err(Details::InvalidSchemaName(schema_name.to_string(), pattern).into())
        }
    }
}

impl SchemaNamespaceValidator for Names {
    fn validate(&self, namespace: &str) -> AvroResult<()> {
        if is_namespace(namespace) {
            Ok(())
        } else {
            let pattern = SchemaNamespaceValidator::regex(self).as_str();
            Err(Details::InvalidNamespace(namespace.to_string(), pattern).into())
        }
    }
}

impl RecordFieldNameValidator for Names {
    fn validate(&self, field_name: &str) -> AvroResult<()> {
        if is_name(field_name) {
            Ok(())
        } else {
            Err(Details::FieldName(field_name.to_string()).into())
        }
    }
}

impl EnumSymbolNameValidator for Names {
    fn validate(&self, symbol: &str) -> AvroResult<()> {
        if is_name(symbol) {
            Ok(())
        } else {
            Err(Details::EnumSymbolName(symbol.to_string()).into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every string of up to four characters over an alphabet with each kind of
    /// character the rules tell apart, and a few real names.
    fn samples() -> Vec<String> {
        let alphabet = ['a', 'Z', '_', '0', '.', '-', 'é', ' '];
        let mut all = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..4 {
            last = last
                .iter()
                .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
                .collect();
            all.extend(last.iter().cloned());
        }
        all.extend(
            [
                "manifest_entry",
                "r2",
                "k117_v118",
                "org.apache.iceberg.data_file",
                "a\n",
                ".x",
                "x.",
                "a..b",
            ]
            .map(String::from),
        );
        all
    }

    #[test]
    fn the_same_answers_as_apache_avros_regexes() {
        for s in samples() {
            let names = SchemaNameValidator::regex(&Names);
            let expected = names.captures(&s).map(|caps| {
                (
                    caps["name"].to_string(),
                    caps.name("namespace").map(|m| m.as_str().to_string()),
                )
            });
            let got = SchemaNameValidator::validate(&Names, &s).ok();
            assert_eq!(got, expected, "schema name {s:?}");

            let namespaces = SchemaNamespaceValidator::regex(&Names);
            let got = SchemaNamespaceValidator::validate(&Names, &s).is_ok();
            assert_eq!(got, namespaces.is_match(&s), "namespace {s:?}");

            let fields = RecordFieldNameValidator::regex(&Names);
            let got = RecordFieldNameValidator::validate(&Names, &s).is_ok();
            assert_eq!(got, fields.is_match(&s), "field name {s:?}");

            let symbols = EnumSymbolNameValidator::regex(&Names);
            let got = EnumSymbolNameValidator::validate(&Names, &s).is_ok();
            assert_eq!(got, symbols.is_match(&s), "enum symbol {s:?}");
        }
    }
}
