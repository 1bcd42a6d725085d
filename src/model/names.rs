//! Validated names of catalogs, namespaces, tables and views.
//!
//! Names are case-sensitive and stored exactly as given (as in Iceberg's JDBC and reference
//! catalogs). Every level must be non-empty, at most [`MAX_NAME_BYTES`] bytes and free of
//! control characters; a namespace has at most [`MAX_NAMESPACE_DEPTH`] levels.

use std::fmt;

/// A name that breaks the rules below; the catalog answers it with a 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidName(pub String);

type NameResult<T> = Result<T, InvalidName>;

fn invalid(message: impl Into<String>) -> InvalidName {
    InvalidName(message.into())
}

/// Longest name of one namespace level, table or view, in UTF-8 bytes.
pub const MAX_NAME_BYTES: usize = 255;
/// Deepest namespace accepted. The Polaris benchmark's concurrent tree is 16 levels deep.
pub const MAX_NAMESPACE_DEPTH: usize = 32;

/// Joins namespace levels in store keys. Control characters are not allowed in names, so
/// the separator cannot occur inside a level.
pub const KEY_SEPARATOR: char = '\u{1f}';

fn validate_name(what: &str, name: &str) -> NameResult<()> {
    if name.is_empty() {
        return Err(invalid(format!("{what} must not be empty")));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(invalid(format!(
            "{what} is longer than {MAX_NAME_BYTES} bytes"
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(invalid(format!(
            "{what} must not contain control characters"
        )));
    }
    Ok(())
}

/// A multi-level namespace, e.g. `["accounting", "tax"]`. The empty namespace is the root,
/// used only as the parent of top-level namespaces.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespace(Vec<String>);

impl Namespace {
    pub fn root() -> Self {
        Namespace(Vec::new())
    }

    pub fn new(levels: Vec<String>) -> NameResult<Self> {
        if levels.is_empty() {
            return Err(invalid("Namespace must not be empty"));
        }
        if levels.len() > MAX_NAMESPACE_DEPTH {
            return Err(invalid(format!(
                "Namespace has {} levels; at most {MAX_NAMESPACE_DEPTH} are allowed",
                levels.len()
            )));
        }
        for level in &levels {
            validate_name("Namespace level", level)?;
        }
        Ok(Namespace(levels))
    }

    /// A namespace as a URL path segment or `parent` parameter spells it: levels joined
    /// by U+001F (`%1F`), each checked as [`Namespace::new`] checks them.
    pub fn parse(raw: &str) -> NameResult<Self> {
        Namespace::new(raw.split(KEY_SEPARATOR).map(str::to_string).collect())
    }

    /// Rebuilds a namespace from a key written by [`Namespace::key`]; keys come from the
    /// store, which only holds validated namespaces.
    pub fn from_key(key: &str) -> Self {
        if key.is_empty() {
            return Namespace::root();
        }
        Namespace(key.split(KEY_SEPARATOR).map(str::to_string).collect())
    }

    pub fn levels(&self) -> &[String] {
        &self.0
    }

    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The store key: levels joined by the unit separator.
    pub fn key(&self) -> String {
        let mut key = String::new();
        for (i, level) in self.0.iter().enumerate() {
            if i > 0 {
                key.push(KEY_SEPARATOR);
            }
            key.push_str(level);
        }
        key
    }

    pub fn parent(&self) -> Namespace {
        let mut levels = self.0.clone();
        levels.pop();
        Namespace(levels)
    }

    pub fn last(&self) -> &str {
        self.0.last().map(String::as_str).unwrap_or("")
    }

    pub fn child(&self, name: &str) -> Namespace {
        let mut levels = self.0.clone();
        levels.push(name.to_string());
        Namespace(levels)
    }
}

/// Dotted form, as Iceberg's Java client prints namespaces in messages.
impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join("."))
    }
}

/// A table or view: a name inside a namespace.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ident {
    pub namespace: Namespace,
    pub name: String,
}

impl Ident {
    pub fn new(namespace: Namespace, name: String) -> NameResult<Self> {
        validate_name("Name", &name)?;
        Ok(Ident { namespace, name })
    }

    /// A table or view from its path's two segments (the namespace as [`Namespace::parse`]
    /// reads it).
    pub fn parse(namespace_raw: &str, name: &str) -> NameResult<Self> {
        Ident::new(Namespace::parse(namespace_raw)?, name.to_string())
    }
}

/// The spec's `TableIdentifier` as a request body carries it:
/// `{"namespace": [...], "name": "..."}`, checked when turned into an [`Ident`]. The local
/// routes and the federated ones parse bodies with it alike.
#[derive(Debug, serde::Deserialize)]
pub struct IdentBody {
    pub namespace: Vec<String>,
    pub name: String,
}

impl IdentBody {
    pub fn into_ident(self) -> NameResult<Ident> {
        Ident::new(Namespace::new(self.namespace)?, self.name)
    }
}

/// The body of a table or view rename.
#[derive(Debug, serde::Deserialize)]
pub struct Rename {
    pub source: IdentBody,
    pub destination: IdentBody,
}

impl fmt::Display for Ident {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.namespace, self.name)
    }
}

/// A catalog name, as in Polaris: 1 to 256 characters, not `system$`.
pub fn validate_catalog_name(name: &str) -> NameResult<()> {
    if name.is_empty() || name.chars().count() > 256 {
        return Err(invalid("Catalog name must be 1 to 256 characters long"));
    }
    if name.chars().any(char::is_control) || name.contains('/') {
        return Err(invalid(
            "Catalog name must not contain control characters or '/'",
        ));
    }
    if name.trim_start().eq_ignore_ascii_case("system$") {
        return Err(invalid("Catalog name 'system$' is reserved"));
    }
    Ok(())
}

/// What a URL path segment keeps unescaped: RFC 3986's unreserved characters.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `name` spelled as one URL path segment: every byte but the unreserved ones escaped.
/// The server's paths (decoded by the router) and the ones it hands out or sends (the
/// config's prefix, delegated endpoints, `floe bench`) all use it.
pub fn path_segment(name: &str) -> String {
    percent_encoding::utf8_percent_encode(name, SEGMENT).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(levels: &[&str]) -> NameResult<Namespace> {
        Namespace::new(levels.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn key_round_trips() {
        let n = ns(&["a", "b.c", "d"]).unwrap();
        assert_eq!(Namespace::from_key(&n.key()), n);
        assert_eq!(n.to_string(), "a.b.c.d");
        assert_eq!(n.parent(), ns(&["a", "b.c"]).unwrap());
        assert!(Namespace::from_key("").is_root());
    }

    #[test]
    fn rejects_bad_levels() {
        assert!(ns(&[]).is_err());
        assert!(ns(&["a", ""]).is_err());
        assert!(ns(&["a\u{1f}b"]).is_err());
        assert!(ns(&["tab\there"]).is_err());
        assert!(ns(&[&"x".repeat(MAX_NAME_BYTES + 1)]).is_err());
        assert!(ns(&[&"x".repeat(MAX_NAME_BYTES)]).is_ok());
        let deep: Vec<String> = (0..=MAX_NAMESPACE_DEPTH).map(|i| i.to_string()).collect();
        assert!(Namespace::new(deep).is_err());
    }

    #[test]
    fn catalog_names() {
        assert!(validate_catalog_name("default").is_ok());
        assert!(validate_catalog_name("").is_err());
        assert!(validate_catalog_name(" SYSTEM$").is_err());
        assert!(validate_catalog_name("a/b").is_err());
    }
}
