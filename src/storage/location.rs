//! Locations: the URIs of tables, views and metadata files, parsed once into what the
//! storage layer needs (which store, which bucket, which key) and into a canonical form
//! used to compare them.
//!
//! The canonical form is a comparison key, never a place to write: scheme aliases are
//! folded (`s3a://` and `s3n://` are `s3://`; `wasbs://c@a.blob…` and
//! `abfss://c@a.dfs…` are both `azure://a/c/`), empty, `.` and `..` segments are
//! refused (on an object store `a//b` is a different key from `a/b`, and `..` could
//! climb out of a granted prefix), and it ends in `/` so that `…/t` never contains
//! `…/t2`.

use super::{StorageError, StorageResult};

/// Which kind of store a location lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    File,
    S3,
    Gcs,
    Azure,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::File => "FILE",
            Scheme::S3 => "S3",
            Scheme::Gcs => "GCS",
            Scheme::Azure => "AZURE",
        }
    }
}

/// A parsed object-store location: `container` is the bucket (S3, GCS) or
/// `account/container` (Azure); `key` has no leading or trailing `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectLocation {
    pub scheme: Scheme,
    /// The Azure storage account; empty for S3 and GCS.
    pub account: String,
    /// The bucket (S3, GCS) or container (Azure).
    pub bucket: String,
    pub key: String,
}

impl ObjectLocation {
    /// `s3://bucket/key`, `gs://bucket/key` or `azure://account/container/key`.
    pub fn canonical(&self) -> String {
        let mut out = match self.scheme {
            Scheme::S3 => format!("s3://{}/", self.bucket),
            Scheme::Gcs => format!("gs://{}/", self.bucket),
            Scheme::Azure => format!("azure://{}/{}/", self.account, self.bucket),
            Scheme::File => unreachable!("file locations are not object locations"),
        };
        if !self.key.is_empty() {
            out.push_str(&self.key);
            out.push('/');
        }
        out
    }
}

fn invalid<T>(message: String) -> StorageResult<T> {
    Err(StorageError::InvalidLocation(message))
}

/// The store a location's scheme names, or an error for unknown schemes.
pub fn scheme_of(location: &str) -> StorageResult<Scheme> {
    let scheme = location.split_once("://").map(|(s, _)| s).unwrap_or("");
    match scheme.to_ascii_lowercase().as_str() {
        "s3" | "s3a" | "s3n" => Ok(Scheme::S3),
        "gs" => Ok(Scheme::Gcs),
        "abfs" | "abfss" | "wasb" | "wasbs" => Ok(Scheme::Azure),
        "file" => Ok(Scheme::File),
        _ if location.starts_with("file:") || location.starts_with('/') => Ok(Scheme::File),
        _ => invalid(format!(
            "Unsupported location {location}: use file:, s3://, gs://, abfss:// or wasbs://"
        )),
    }
}

/// Characters an IAM policy reads as wildcards (`*`, `?`) or variables (`${…}`): a
/// vended credential's session policy names the table's key, so a location holding one
/// would be scoped to other tables' keys too.
const POLICY_CHARACTERS: [char; 3] = ['*', '?', '$'];

/// Checks the segments of a path: no empty, `.` or `..` segments, no control characters,
/// none of [`POLICY_CHARACTERS`].
fn check_key(location: &str, key: &str) -> StorageResult<()> {
    if key.chars().any(char::is_control) {
        return invalid(format!(
            "Location {location:?} must not contain control characters"
        ));
    }
    if key.contains(POLICY_CHARACTERS) {
        return invalid(format!(
            "Location {location} must not contain '*', '?' or '$' (access policies read them as wildcards)"
        ));
    }
    for segment in key.split('/') {
        match segment {
            "" => {
                return invalid(format!(
                    "Location {location} must not contain empty path segments ('//')"
                ))
            }
            "." | ".." => {
                return invalid(format!(
                    "Location {location} must not contain '.' or '..' segments"
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Parses an object-store location (`s3://`, `gs://`, `abfss://`, `wasbs://`, ...).
pub fn parse_object(location: &str) -> StorageResult<ObjectLocation> {
    let scheme = scheme_of(location)?;
    if scheme == Scheme::File {
        return invalid(format!("{location} is not an object-store location"));
    }
    let rest = location.split_once("://").map(|(_, r)| r).unwrap_or("");
    let (authority, key) = rest.split_once('/').unwrap_or((rest, ""));
    let key = key.trim_end_matches('/');
    if !key.is_empty() {
        check_key(location, key)?;
    }
    let (account, bucket) = match scheme {
        Scheme::Azure => {
            // container@account.dfs.core.windows.net (or .blob.)
            let Some((container, host)) = authority.split_once('@') else {
                return invalid(format!(
                    "Azure location {location} must look like abfss://container@account.dfs.core.windows.net/path"
                ));
            };
            let account = host.split('.').next().unwrap_or("");
            (account.to_string(), container.to_string())
        }
        _ => (String::new(), authority.to_string()),
    };
    let bucket_ok = |b: &str| {
        !b.is_empty()
            && b.len() <= 255
            && b.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'))
    };
    if !bucket_ok(&bucket) || (scheme == Scheme::Azure && !bucket_ok(&account)) {
        return invalid(format!(
            "Location {location} has no valid bucket or container name"
        ));
    }
    Ok(ObjectLocation {
        scheme,
        account,
        bucket,
        key: key.to_string(),
    })
}

/// Canonical form of a location, with a trailing `/`: `file:///abs/path/`,
/// `s3://bucket/key/`, `gs://bucket/key/` or `azure://account/container/key/`.
/// Rejects unknown schemes, relative paths and `.`/`..` segments (which could escape a
/// base).
pub fn canonical_location(location: &str) -> StorageResult<String> {
    if scheme_of(location)? != Scheme::File {
        return Ok(parse_object(location)?.canonical());
    }
    let path = super::local::local_path_str(location)?;
    let mut canonical = String::from("file://");
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        if segment == "." || segment == ".." {
            return invalid(format!(
                "Location {location} must not contain '.' or '..' segments"
            ));
        }
        canonical.push('/');
        canonical.push_str(segment);
    }
    canonical.push('/');
    Ok(canonical)
}

/// Whether `location` lies inside (or is) one of `bases`; all in canonical form.
pub fn is_within(location: &str, bases: &[String]) -> bool {
    bases.iter().any(|base| location.starts_with(base.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_forms_agree() {
        let want = "file:///tmp/wh/t/";
        assert_eq!(canonical_location("file:///tmp/wh/t").unwrap(), want);
        assert_eq!(canonical_location("file:/tmp/wh/t/").unwrap(), want);
        assert_eq!(canonical_location("/tmp//wh/t").unwrap(), want);
        assert_eq!(
            canonical_location("file://localhost/tmp/wh/t").unwrap(),
            want
        );
        assert_eq!(
            canonical_location("s3a://lake/a/t/").unwrap(),
            "s3://lake/a/t/"
        );
        assert_eq!(canonical_location("s3://lake").unwrap(), "s3://lake/");
        assert_eq!(
            canonical_location("wasbs://c@acct.blob.core.windows.net/x").unwrap(),
            canonical_location("abfss://c@acct.dfs.core.windows.net/x/").unwrap()
        );
        assert_eq!(canonical_location("gs://b/k").unwrap(), "gs://b/k/");
    }

    #[test]
    fn rejects_escapes_and_other_schemes() {
        assert!(canonical_location("file:///tmp/wh/../etc").is_err());
        assert!(canonical_location("s3://lake/a/../b").is_err());
        assert!(canonical_location("s3://lake/a//b").is_err());
        assert!(canonical_location("s3:///key").is_err());
        assert!(canonical_location("hdfs://nn/x").is_err());
        assert!(canonical_location("relative/path").is_err());
        assert!(canonical_location("abfss://noaccount/x").is_err());
        // Wildcards and variables of the session policy a vended credential carries.
        for location in [
            "s3://lake/wh/*",
            "s3://lake/wh/t?",
            "s3://lake/wh/${aws:username}",
        ] {
            let err = canonical_location(location).unwrap_err().to_string();
            assert!(err.contains("wildcards"), "{location}: {err}");
        }
    }

    #[test]
    fn within_is_by_segment() {
        let bases = vec!["file:///tmp/wh/".to_string(), "s3://lake/a/".to_string()];
        assert!(is_within("file:///tmp/wh/a/", &bases));
        assert!(!is_within("file:///tmp/wh2/a/", &bases));
        assert!(is_within(
            &canonical_location("s3://lake/a/t").unwrap(),
            &bases
        ));
        assert!(!is_within(
            &canonical_location("s3://lake/ab").unwrap(),
            &bases
        ));
        assert!(!is_within(
            &canonical_location("gs://lake/a/t").unwrap(),
            &bases
        ));
    }

    #[test]
    fn object_locations_split() {
        let l = parse_object("abfss://data@acct.dfs.core.windows.net/wh/t").unwrap();
        assert_eq!(
            (l.account.as_str(), l.bucket.as_str(), l.key.as_str()),
            ("acct", "data", "wh/t")
        );
        let l = parse_object("s3://lake/wh/t/metadata/1.json").unwrap();
        assert_eq!(
            (l.bucket.as_str(), l.key.as_str()),
            ("lake", "wh/t/metadata/1.json")
        );
    }
}
