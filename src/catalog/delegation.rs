//! Access delegation: what a client gets, besides a table's metadata, to reach its files —
//! the storage settings in `config`, vended credentials in `storage-credentials`, or the
//! remote-signing settings — and the `/credentials` and `/sign` endpoints.
//!
//! Credentials and signatures are scoped by the caller's privileges on the table:
//! TABLE_WRITE_DATA gets read-write, TABLE_READ_DATA read-only, neither a 403. Only
//! object-store catalogs delegate; on FILE storage the answer is empty, as before.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

use super::error::{CatalogError, CatalogResult};
use super::staged::Reach;
use super::tables::{LoadedTable, SnapshotsMode};
use super::{Catalog, RequestContext};
use crate::auth::privileges::{Privilege, Securable};
use crate::model::{CatalogRecord, Ident};
use crate::storage::config::S3Storage;
use crate::storage::location::{parse_object, ObjectLocation};
use crate::storage::signing::{self, Refusal, SignRequest, SignResult};
use crate::storage::vending::{server_keys, AccessLevel, TemporaryKeys};
use crate::storage::StorageConfig;

/// One entry of `storage-credentials`: the config applies under `prefix` (serialised as
/// the spec's `StorageCredential`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StorageCredential {
    pub prefix: String,
    pub config: BTreeMap<String, String>,
}

/// The `config` and `storage-credentials` of a LoadTableResult.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableConfig {
    pub config: BTreeMap<String, String>,
    pub credentials: Vec<StorageCredential>,
}

impl TableConfig {
    /// When the first of its credentials expires, if any does (vended static keys do
    /// not, and are not confined to a table anyway).
    pub fn expires_at_ms(&self) -> Option<i64> {
        self.credentials
            .iter()
            .filter_map(|c| c.config.get(EXPIRES_AT_MS)?.parse().ok())
            .min()
    }

    /// Whether it tells the client to have its requests signed by the catalog.
    pub fn signs(&self) -> bool {
        self.config.get(REMOTE_SIGNING).map(String::as_str) == Some("true")
    }
}

/// The config key that turns remote signing on.
const REMOTE_SIGNING: &str = "s3.remote-signing-enabled";

/// The credential config key that says when its keys expire (milliseconds since 1970).
const EXPIRES_AT_MS: &str = "s3.session-token-expires-at-ms";

/// The parts of a metadata document that say where a table's files are.
#[derive(Deserialize)]
struct FileLocations {
    location: String,
}

/// `v1/{prefix}/namespaces/{ns}/tables/{t}/{what}`, relative to the catalog's URI (as
/// Iceberg clients resolve `client.refresh-credentials-endpoint` and `signer.endpoint`).
fn table_endpoint(catalog: &str, ident: &Ident, what: &str) -> String {
    let encode = crate::model::path_segment;
    let namespace: Vec<String> = ident.namespace.levels().iter().map(|l| encode(l)).collect();
    format!(
        "v1/{}/namespaces/{}/tables/{}/{what}",
        encode(catalog),
        namespace.join("%1F"),
        encode(&ident.name)
    )
}

/// What clients need to reach an S3 catalog's files, credentials aside.
fn s3_client_config(s3: &S3Storage) -> BTreeMap<String, String> {
    let mut config = BTreeMap::new();
    config.insert("client.region".into(), s3.region.clone());
    if let Some(endpoint) = &s3.endpoint {
        config.insert("s3.endpoint".into(), endpoint.clone());
    }
    config.insert(
        "s3.path-style-access".into(),
        s3.path_style_access.to_string(),
    );
    config
}

/// The credential's keys; `refresh_endpoint`, where expiring ones are renewed (none for
/// a generic table, which is loaded again instead).
fn credential_config(
    keys: &TemporaryKeys,
    refresh_endpoint: Option<String>,
) -> BTreeMap<String, String> {
    let mut config = BTreeMap::new();
    config.insert("s3.access-key-id".into(), keys.access_key_id.clone());
    config.insert(
        "s3.secret-access-key".into(),
        keys.secret_access_key.clone(),
    );
    if let Some(token) = &keys.session_token {
        config.insert("s3.session-token".into(), token.clone());
    }
    if let Some(expires) = keys.expires_at_ms {
        config.insert(EXPIRES_AT_MS.into(), expires.to_string());
        if let Some(endpoint) = refresh_endpoint {
            config.insert("client.refresh-credentials-endpoint".into(), endpoint);
            config.insert("client.refresh-credentials-enabled".into(), "true".into());
        }
    }
    config
}

/// Catalog records for delegation, kept up to [`CATALOG_FRESHNESS`]: every load from a
/// Java or Python client asks for delegation, and a store read per load would cost a
/// third of loadTable's throughput. A storage config changed through this node is seen
/// at once (the entry is dropped); through another node within the freshness interval,
/// as grants are (README).
#[derive(Default)]
pub(super) struct CatalogCache {
    entries:
        std::sync::RwLock<HashMap<String, (std::time::Instant, std::sync::Arc<CatalogRecord>)>>,
    /// Bumped by each [`CatalogCache::forget`]: a record read before a forget is not
    /// kept after it (a slow read of the old record, landing after an acknowledged
    /// change's forget, would serve the old storage config for a freshness interval).
    forgotten: std::sync::atomic::AtomicU64,
}

const CATALOG_FRESHNESS: std::time::Duration = std::time::Duration::from_secs(1);

impl CatalogCache {
    pub(super) fn forget(&self, name: &str) {
        let mut entries = self.entries.write().expect("catalog cache poisoned");
        entries.remove(name);
        self.forgotten
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Catalog {
    /// The catalog's record, from the cache when fresh.
    pub(super) async fn delegation_catalog(
        &self,
        name: &str,
    ) -> CatalogResult<std::sync::Arc<CatalogRecord>> {
        if let Some((at, record)) = self
            .catalog_cache
            .entries
            .read()
            .expect("catalog cache poisoned")
            .get(name)
        {
            if at.elapsed() < CATALOG_FRESHNESS {
                crate::metrics::record_cache("catalog", true);
                return Ok(record.clone());
            }
        }
        crate::metrics::record_cache("catalog", false);
        let forgotten = &self.catalog_cache.forgotten;
        let seen = forgotten.load(std::sync::atomic::Ordering::SeqCst);
        let record = std::sync::Arc::new(self.get_catalog(name).await?);
        let mut entries = self
            .catalog_cache
            .entries
            .write()
            .expect("catalog cache poisoned");
        if forgotten.load(std::sync::atomic::Ordering::SeqCst) != seen {
            // A change was made meanwhile: serve this read, keep none.
            return Ok(record);
        }
        if entries.len() >= 10_000 {
            entries.clear();
        }
        entries.insert(
            name.to_string(),
            (std::time::Instant::now(), record.clone()),
        );
        Ok(record)
    }

    /// The access level the caller has on a table's data; 403 with neither privilege.
    pub(super) fn data_access(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
    ) -> CatalogResult<AccessLevel> {
        let target = Securable::table(ident);
        if ctx
            .require(catalog, Privilege::TABLE_WRITE_DATA, &target)
            .is_ok()
        {
            return Ok(AccessLevel::Write);
        }
        ctx.require(catalog, Privilege::TABLE_READ_DATA, &target)?;
        Ok(AccessLevel::Read)
    }

    /// Where a table's files are, as far as its credentials and signatures reach: its
    /// location, which the store keeps from overlapping any other object's (and which
    /// holds its metadata path, `locations::metadata_dir`). Not its `write.data.path`:
    /// nothing keeps that from naming another table's directory, and a caller who may set
    /// a table's properties could then reach that table's files through its own.
    fn file_locations(metadata: &str) -> CatalogResult<(String, Vec<ObjectLocation>)> {
        let doc: FileLocations = serde_json::from_str(metadata).map_err(CatalogError::internal)?;
        let locations = vec![parse_object(&doc.location)?];
        Ok((doc.location, locations))
    }

    /// Where `/credentials` and `/sign` reach for the table as `loaded`: its location, or,
    /// when there is no such table, the one its caller's staged create holds (`staged.rs`).
    async fn reach(
        &self,
        ctx: &RequestContext,
        record: &CatalogRecord,
        ident: &Ident,
        loaded: CatalogResult<LoadedTable>,
    ) -> CatalogResult<Reach> {
        match loaded {
            Ok(table) => Self::table_reach(&table),
            Err(missing) => match self.staged_location(ctx, record, ident, missing).await {
                Err(refused) => self.landed_meanwhile(ctx, record, ident, refused).await,
                staged => staged,
            },
        }
    }

    fn table_reach(table: &LoadedTable) -> CatalogResult<Reach> {
        let (location, locations) = Self::file_locations(&table.metadata)?;
        Ok(Reach {
            location,
            locations,
            hold: None,
        })
    }

    /// The table's reach if it exists now, else `refused`. For when the staged path
    /// refused (no hold of the caller's, or its hold may not be extended): the staged
    /// create's own commit may have landed since the table's load, turning the hold into
    /// the table (which hides it from `staged_holds` and makes its extension overlap the
    /// table). The request is then answered as if it came after the commit. Only refusals
    /// pay this second load.
    async fn landed_meanwhile(
        &self,
        ctx: &RequestContext,
        record: &CatalogRecord,
        ident: &Ident,
        refused: CatalogError,
    ) -> CatalogResult<Reach> {
        match self
            .load_table(ctx, &record.name, ident, SnapshotsMode::Refs)
            .await
        {
            Ok(table) => Self::table_reach(&table),
            Err(_) => Err(refused),
        }
    }

    /// Refuses, before a change, a caller that asks for delegation it may not get (so
    /// that the refusal changes nothing).
    pub async fn check_delegation(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
    ) -> CatalogResult<()> {
        if ctx.access_delegation.any() {
            let record = self.delegation_catalog(catalog).await?;
            if matches!(
                StorageConfig::of(&record.storage_config),
                StorageConfig::S3(_)
            ) {
                self.data_access(ctx, catalog, ident)?;
            }
        }
        Ok(())
    }

    /// The `config` and `storage-credentials` for a table the caller just loaded or
    /// created, following its `X-Iceberg-Access-Delegation` header. Without the header
    /// the answer is empty (and costs nothing).
    pub async fn table_config(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
        metadata: &str,
    ) -> CatalogResult<TableConfig> {
        if !ctx.access_delegation.any() {
            return Ok(TableConfig::default());
        }
        // Boxed: vending's future (STS, the credential cache) is about 7 KB, which every
        // load's future reserved and copied when boxed, though few loads ask for it.
        Box::pin(async move {
            let record = self.delegation_catalog(catalog).await?;
            self.table_config_in(ctx, &record, ident, metadata).await
        })
        .await
    }

    /// [`Catalog::table_config`] with the catalog's record at hand (a create computes it
    /// before anything is written, so that a refusal or an STS failure changes nothing).
    pub(super) async fn table_config_in(
        &self,
        ctx: &RequestContext,
        record: &CatalogRecord,
        ident: &Ident,
        metadata: &str,
    ) -> CatalogResult<TableConfig> {
        let modes = ctx.access_delegation;
        if !modes.any() {
            return Ok(TableConfig::default());
        }
        let catalog = record.name.as_str();
        let StorageConfig::S3(s3) = StorageConfig::of(&record.storage_config) else {
            return Ok(TableConfig::default());
        };
        let mut out = TableConfig {
            config: s3_client_config(&s3),
            credentials: Vec::new(),
        };
        let vend = modes.vended_credentials && s3.can_vend();
        if !vend && !modes.remote_signing {
            return Ok(out);
        }
        let level = self.data_access(ctx, catalog, ident)?;
        if vend {
            let (location, locations) = Self::file_locations(metadata)?;
            let credential = self
                .vend(record, &s3, Some(ident), location, &locations, level)
                .await?;
            out.config.extend(credential.config.clone());
            out.credentials.push(credential);
        } else {
            let sign = table_endpoint(catalog, ident, "sign");
            out.config.insert(REMOTE_SIGNING.into(), "true".into());
            out.config.insert("s3.signer.endpoint".into(), sign.clone());
            out.config.insert("signer.endpoint".into(), sign);
            // PyIceberg signs only when told which signer to use (Java ignores this).
            out.config
                .insert("s3.signer".into(), "S3V4RestSigner".into());
        }
        Ok(out)
    }

    /// Credentials for `locations`, announced under `location`; `refresh`: the table
    /// whose `/credentials` renews them (none for a generic table).
    async fn vend(
        &self,
        record: &CatalogRecord,
        s3: &S3Storage,
        refresh: Option<&Ident>,
        location: String,
        locations: &[ObjectLocation],
        level: AccessLevel,
    ) -> CatalogResult<StorageCredential> {
        let keys = self
            .vendor
            .s3_credentials((record.id, record.version), s3, locations, level)
            .await?;
        let refresh = refresh.map(|ident| table_endpoint(&record.name, ident, "credentials"));
        let mut config = credential_config(&keys, refresh);
        config.extend(s3_client_config(s3));
        Ok(StorageCredential {
            prefix: location,
            config,
        })
    }

    /// `storage-credentials` for a generic table's base location (Polaris answers them
    /// with a generic table's create and load), when the caller asks for vended
    /// credentials: scoped to that location and to the caller's privileges on the table,
    /// as a table's are. None without a base location (nothing to scope them to) or on
    /// storage that vends nothing.
    pub(super) async fn generic_table_credentials(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
        base_location: Option<&str>,
    ) -> CatalogResult<Vec<StorageCredential>> {
        let (true, Some(base)) = (ctx.access_delegation.vended_credentials, base_location) else {
            return Ok(Vec::new());
        };
        let record = self.delegation_catalog(catalog).await?;
        let StorageConfig::S3(s3) = StorageConfig::of(&record.storage_config) else {
            return Ok(Vec::new());
        };
        if !s3.can_vend() {
            return Ok(Vec::new());
        }
        let level = self.data_access(ctx, catalog, ident)?;
        let locations = [parse_object(base)?];
        let credential = self
            .vend(&record, &s3, None, base.to_string(), &locations, level)
            .await?;
        Ok(vec![credential])
    }

    /// `GET …/credentials`: fresh (or cached) credentials for the table, scoped by the
    /// caller's privileges. Empty on storage that vends nothing. A staged table (not
    /// committed yet) gets them for the location its caller's staged create holds, and
    /// the hold is kept until they expire (`staged.rs`).
    pub async fn load_credentials(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
    ) -> CatalogResult<Vec<StorageCredential>> {
        let level = self.data_access(ctx, catalog, ident)?;
        let loaded = self
            .load_table(ctx, catalog, ident, SnapshotsMode::Refs)
            .await;
        let record = self.get_catalog(catalog).await?;
        let s3 = match StorageConfig::of(&record.storage_config) {
            StorageConfig::S3(s3) if s3.can_vend() => s3,
            // Nothing to vend, for a table or a staged one alike.
            _ => {
                if loaded.is_err() {
                    self.reach(ctx, &record, ident, loaded).await?;
                }
                return Ok(Vec::new());
            }
        };
        let mut reach = self.reach(ctx, &record, ident, loaded).await?;
        // Twice at most: a hold that may not be extended for the credentials is replaced
        // by the table's own reach (no hold), or the request is refused.
        loop {
            let credential = self
                .vend(
                    &record,
                    &s3,
                    Some(ident),
                    reach.location.clone(),
                    &reach.locations,
                    level,
                )
                .await?;
            let expires = credential.config.get(EXPIRES_AT_MS);
            let (Some(hold), Some(expires)) =
                (reach.hold.take(), expires.and_then(|e| e.parse().ok()))
            else {
                return Ok(vec![credential]);
            };
            match self.hold_staged_until(hold, expires).await {
                Ok(()) => return Ok(vec![credential]),
                Err(refused) => {
                    reach = self.landed_meanwhile(ctx, &record, ident, refused).await?;
                }
            }
        }
    }

    /// `POST …/sign`: checks the request against the table and the caller's privileges,
    /// then signs it with the catalog's key. A staged table (not committed yet) is
    /// signed for within the location its caller's staged create holds, and the hold is
    /// kept while the signature is usable (`staged.rs`).
    pub async fn sign_request(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
        request: SignRequest,
    ) -> CatalogResult<SignResult> {
        let held = self.data_access(ctx, catalog, ident)?;
        let loaded = self
            .load_table(ctx, catalog, ident, SnapshotsMode::Refs)
            .await;
        let record = self.get_catalog(catalog).await?;
        let StorageConfig::S3(s3) = StorageConfig::of(&record.storage_config) else {
            loaded?;
            return Err(CatalogError::bad_request(format!(
                "Catalog {catalog} is not on S3 storage: there is nothing to sign"
            )));
        };
        let refuse = |r: Refusal| match r {
            Refusal::BadRequest(m) => CatalogError::bad_request(m),
            Refusal::Forbidden(m) => CatalogError::Forbidden(m),
        };
        // Checked before a hold is extended, so that a refusal changes nothing.
        let check = |reach: &Reach| {
            let needed = signing::authorize(&s3, &reach.locations, &request).map_err(refuse)?;
            if needed == AccessLevel::Write && held == AccessLevel::Read {
                return Err(CatalogError::Forbidden(format!(
                    "Principal '{}' may only read table {ident}: a {} cannot be signed",
                    ctx.principal.name, request.method
                )));
            }
            Ok(())
        };
        let mut reach = self.reach(ctx, &record, ident, loaded).await?;
        check(&reach)?;
        let keys = server_keys(&s3)?;
        if let Some(hold) = reach.hold.take() {
            if let Err(refused) = self.hold_staged_for_signing(hold).await {
                reach = self.landed_meanwhile(ctx, &record, ident, refused).await?;
                check(&reach)?;
            }
        }
        signing::sign(&keys, &request).map_err(refuse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Namespace;

    #[test]
    fn endpoints_encode_names() {
        let ident = Ident::new(
            Namespace::new(vec!["a b".into(), "c".into()]).unwrap(),
            "t/1".into(),
        )
        .unwrap();
        assert_eq!(
            table_endpoint("cat", &ident, "credentials"),
            "v1/cat/namespaces/a%20b%1Fc/tables/t%2F1/credentials"
        );
    }

    #[test]
    fn static_keys_carry_no_refresh_endpoint() {
        let keys = TemporaryKeys {
            access_key_id: "a".into(),
            secret_access_key: "s".into(),
            session_token: None,
            expires_at_ms: None,
        };
        let config = credential_config(&keys, Some("v1/x".into()));
        assert!(!config.contains_key("client.refresh-credentials-endpoint"));
        assert!(!config.contains_key("s3.session-token"));
    }
}
