//! A hash that is the same in every process and every build (unlike std's `DefaultHasher`,
//! which promises neither): ETags, database lock keys and directory names derived from it
//! must agree between nodes and across restarts.

/// 64-bit FNV-1a of `bytes`.
pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf29ce484222325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x100000001b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_published_fnv1a_vectors() {
        assert_eq!(fnv1a(*b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a(*b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a(*b"foobar"), 0x85944171f73967e8);
    }
}
