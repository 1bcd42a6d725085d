//! Where metadata files live, and the rules for table and view locations.
//!
//! Floe writes metadata files to the local file system (`file:` locations); object
//! stores come with credential vending in a later release. Locations are compared in a
//! canonical form, `file:///abs/path/`, so that `file:/x`, `file:///x` and `/x` agree.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::catalog::error::{CatalogError, CatalogResult};

/// Canonical form of a location, with a trailing `/`: `file:///abs/path/`.
/// Rejects other schemes, relative paths and `.`/`..` segments (which could escape a base).
pub fn canonical_location(location: &str) -> CatalogResult<String> {
    let path = local_path_str(location)?;
    let mut canonical = String::from("file://");
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        if segment == "." || segment == ".." {
            return Err(CatalogError::bad_request(format!(
                "Location {location} must not contain '.' or '..' segments"
            )));
        }
        canonical.push('/');
        canonical.push_str(segment);
    }
    canonical.push('/');
    Ok(canonical)
}

/// The absolute path a `file:` location (or a plain absolute path) names.
fn local_path_str(location: &str) -> CatalogResult<&str> {
    let path = if let Some(rest) = location.strip_prefix("file://") {
        // `file:///abs` (empty authority) or `file://localhost/abs`.
        let rest = rest.strip_prefix("localhost").unwrap_or(rest);
        rest
    } else if let Some(rest) = location.strip_prefix("file:") {
        rest
    } else if location.starts_with('/') {
        location
    } else {
        return Err(CatalogError::bad_request(format!(
            "Unsupported location {location}: this server stores files on its local file system and accepts only file: locations"
        )));
    };
    if !path.starts_with('/') {
        return Err(CatalogError::bad_request(format!(
            "Location {location} must be an absolute path"
        )));
    }
    if path.chars().any(char::is_control) {
        return Err(CatalogError::bad_request(format!(
            "Location {location:?} must not contain control characters"
        )));
    }
    Ok(path)
}

pub fn local_path(location: &str) -> CatalogResult<PathBuf> {
    Ok(PathBuf::from(local_path_str(location)?))
}

/// Whether `location` lies inside (or is) one of `bases`; all in canonical form.
pub fn is_within(location: &str, bases: &[String]) -> bool {
    bases.iter().any(|base| location.starts_with(base.as_str()))
}

/// Longest directory name made from a name; file systems allow 255 bytes per component,
/// and a table directory adds a 33-byte suffix.
pub const MAX_SEGMENT_BYTES: usize = 128;

/// A name made safe to be one path segment: anything but `[A-Za-z0-9_-]` and non-leading
/// dots is percent-encoded, so names like `..` or `a/b` cannot change the directory tree.
/// Long results are cut and end in a hash of the whole name, so they stay distinct.
pub fn path_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, b) in name.bytes().enumerate() {
        let keep = b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0);
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.len() > MAX_SEGMENT_BYTES {
        let mut cut = MAX_SEGMENT_BYTES - 17;
        // Never cut inside a %XX escape.
        while out[..cut].rfind('%').is_some_and(|p| p + 3 > cut) {
            cut -= 1;
        }
        let hash = crate::stable_hash::fnv1a(name.bytes());
        out.truncate(cut);
        out.push_str(&format!("~{hash:016x}"));
    }
    out
}

/// Writes a new file that must not exist yet, and makes it durable (file and directory
/// entry) before returning: a pointer is only swapped to a file that is complete on disk.
/// The bytes go to a temporary name first and are then hard-linked to the final name, so
/// a crash never leaves a truncated file under a metadata file's name, and an existing
/// file is never replaced (linking fails if the name is taken).
pub fn write_new_file(location: &str, contents: &[u8], fsync: bool) -> CatalogResult<()> {
    let path = local_path(location)?;
    let dir = path
        .parent()
        .context("metadata file has no directory")
        .map_err(CatalogError::internal)?;
    fs::create_dir_all(dir)
        .with_context(|| format!("creating {}", dir.display()))
        .map_err(CatalogError::internal)?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let temporary = dir.join(format!(
        ".{file_name}.{}.tmp",
        uuid::Uuid::new_v4().simple()
    ));
    let result = write_and_link(&temporary, &path, contents, fsync);
    let _ = fs::remove_file(&temporary);
    match result {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            return Err(CatalogError::CommitFailed(format!(
                "Metadata file {location} already exists"
            )))
        }
        Err(e) => {
            return Err(CatalogError::internal(
                anyhow::Error::new(e).context(format!("writing {}", path.display())),
            ))
        }
    }
    if fsync {
        sync_dir(dir).map_err(CatalogError::internal)?;
    }
    Ok(())
}

fn write_and_link(
    temporary: &Path,
    path: &Path,
    contents: &[u8],
    fsync: bool,
) -> std::io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(temporary)?;
    file.write_all(contents)?;
    if fsync {
        file.sync_data()?;
    }
    fs::hard_link(temporary, path)
}

fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))
}

/// Whether the file at a location exists (a location this module cannot resolve is
/// reported as present: there is nothing to check).
pub fn file_exists(location: &str) -> bool {
    local_path(location).map(|p| p.exists()).unwrap_or(true)
}

/// Best-effort removal of a file this server wrote but will not point at (a lost race).
pub fn remove_file_quietly(location: &str) {
    if let Ok(path) = local_path(location) {
        let _ = fs::remove_file(path);
    }
}

/// Reads a metadata file, e.g. one named by a register request. A missing file is the
/// client's mistake (400), not a server fault.
pub fn read_file(location: &str, max_bytes: u64) -> CatalogResult<Vec<u8>> {
    let path = local_path(location)?;
    let meta = fs::metadata(&path).map_err(|e| {
        CatalogError::bad_request(format!("Cannot read metadata file {location}: {e}"))
    })?;
    if meta.len() > max_bytes {
        return Err(CatalogError::bad_request(format!(
            "Metadata file {location} is larger than {max_bytes} bytes"
        )));
    }
    fs::read(&path).map_err(|e| {
        CatalogError::bad_request(format!("Cannot read metadata file {location}: {e}"))
    })
}

/// Deletes everything under a table's location (purge). The store guarantees no other
/// table's location lies inside it.
pub fn remove_tree(location: &str) -> anyhow::Result<()> {
    let path = local_path(location).map_err(|e| anyhow::anyhow!("{e}"))?;
    match fs::remove_dir_all(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(anyhow::Error::new(e).context(format!("removing {}", path.display()))),
    }
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
    }

    #[test]
    fn rejects_escapes_and_other_schemes() {
        assert!(canonical_location("file:///tmp/wh/../etc").is_err());
        assert!(canonical_location("s3://bucket/x").is_err());
        assert!(canonical_location("relative/path").is_err());
    }

    #[test]
    fn within_is_by_segment() {
        let bases = vec!["file:///tmp/wh/".to_string()];
        assert!(is_within("file:///tmp/wh/a/", &bases));
        assert!(!is_within("file:///tmp/wh2/a/", &bases));
    }

    #[test]
    fn segments_are_safe() {
        assert_eq!(path_segment("orders_2024-x.y"), "orders_2024-x.y");
        assert_eq!(path_segment(".."), "%2E.");
        assert_eq!(path_segment("a/b"), "a%2Fb");
        assert_eq!(path_segment("%"), "%25");
        let long = path_segment(&"é".repeat(127));
        assert!(long.len() <= MAX_SEGMENT_BYTES, "{}", long.len());
        assert_ne!(long, path_segment(&"é".repeat(126)));
        assert!(path_segment(&"x".repeat(255)).len() <= MAX_SEGMENT_BYTES);
    }

    #[test]
    fn new_files_are_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let loc = format!("file://{}/m/00001.json", dir.path().display());
        write_new_file(&loc, b"{}", true).unwrap();
        assert!(matches!(
            write_new_file(&loc, b"{}", true),
            Err(CatalogError::CommitFailed(_))
        ));
        assert_eq!(read_file(&loc, 10).unwrap(), b"{}");
        assert!(read_file(&loc, 1).is_err());
    }
}
