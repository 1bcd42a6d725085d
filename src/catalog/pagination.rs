//! Page tokens for list calls. A token is the hex of the last name returned, so the next
//! page is an index range scan (`name > token`), never an offset over everything.

use super::error::{CatalogError, CatalogResult};
use crate::store::{Page, PageRequest};

/// Page size used when the client asks for pages (sends `pageToken`) without a size.
pub const DEFAULT_PAGE_SIZE: usize = 1000;
/// Largest page served; larger `pageSize` values are reduced to this.
pub const MAX_PAGE_SIZE: usize = 1000;

/// What a list call asked for.
#[derive(Debug, Clone, Default)]
pub struct ListRequest {
    /// `None`: the parameter was absent. `Some("")`: the client starts paging.
    pub page_token: Option<String>,
    pub page_size: Option<usize>,
}

/// One page of a list call and the token for the next, if more follow.
#[derive(Debug, Clone)]
pub struct Listed<T> {
    pub items: Vec<T>,
    pub next_page_token: Option<String>,
}

impl ListRequest {
    /// Without `pageToken` and `pageSize` everything is returned, as the spec says for
    /// clients that do not paginate.
    pub fn to_page_request(&self) -> CatalogResult<PageRequest> {
        if self.page_size == Some(0) {
            return Err(CatalogError::bad_request("pageSize must be at least 1"));
        }
        let limit = match (&self.page_token, self.page_size) {
            (None, None) => None,
            (_, size) => Some(size.unwrap_or(DEFAULT_PAGE_SIZE).min(MAX_PAGE_SIZE)),
        };
        let after = match self.page_token.as_deref() {
            None | Some("") => None,
            Some(token) => Some(decode_token(token)?),
        };
        Ok(PageRequest { after, limit })
    }
}

pub fn listed<T, U>(page: Page<T>, map: impl FnMut(T) -> U) -> Listed<U> {
    Listed {
        items: page.items.into_iter().map(map).collect(),
        next_page_token: page.next_after.map(|name| encode_token(&name)),
    }
}

fn encode_token(name: &str) -> String {
    name.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_token(token: &str) -> CatalogResult<String> {
    let invalid = || CatalogError::bad_request(format!("Invalid pageToken: {token:?}"));
    // Work on bytes: a token is client input, and slicing a `str` at byte offsets
    // panics inside a multi-byte character.
    let hex = token.as_bytes();
    if !hex.len().is_multiple_of(2) || hex.len() > 4096 {
        return Err(invalid());
    }
    let digit = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = hex
        .chunks_exact(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(invalid)?;
    // No name holds a NUL (names refuse control characters), and PostgreSQL refuses one
    // in any text it is given.
    let name = String::from_utf8(bytes).map_err(|_| invalid())?;
    if name.contains('\0') {
        return Err(invalid());
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip() {
        for name in ["a", "NS_12", "ünïcode", ""] {
            assert_eq!(decode_token(&encode_token(name)).unwrap(), name);
        }
        assert!(decode_token("zz").is_err());
        assert!(decode_token("abc").is_err());
        assert!(decode_token("00").is_err());
        assert!(decode_token("610062").is_err());
        // Multi-byte characters in a token are refused, never sliced through.
        for bad in ["é", "éé", "aé", "éa", "€1", "+1", "-1"] {
            assert!(decode_token(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn no_token_means_everything() {
        let all = ListRequest::default().to_page_request().unwrap();
        assert_eq!(all.limit, None);
        let started = ListRequest {
            page_token: Some(String::new()),
            page_size: None,
        };
        assert_eq!(
            started.to_page_request().unwrap().limit,
            Some(DEFAULT_PAGE_SIZE)
        );
        let big = ListRequest {
            page_token: None,
            page_size: Some(1_000_000),
        };
        assert_eq!(big.to_page_request().unwrap().limit, Some(MAX_PAGE_SIZE));
        let zero = ListRequest {
            page_token: None,
            page_size: Some(0),
        };
        assert!(zero.to_page_request().is_err());
    }
}
