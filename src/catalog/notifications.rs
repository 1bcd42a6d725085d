//! Polaris's notifications (`POST …/tables/{table}/notifications`): how an EXTERNAL
//! catalog follows the catalog that owns its tables (Polaris's "static facade"; Snowflake
//! sends them to keep an Open Catalog copy of its Iceberg tables).
//!
//! - Only an EXTERNAL catalog takes them (400 for an INTERNAL one), and only they change
//!   its tables and views: every other REST write there is a 400 but a drop without purge
//!   and a register that replaces nothing, which Polaris allows too
//!   (`objects::require_internal`).
//! - CREATE and UPDATE point the table at the notified metadata file, making the table
//!   (and any missing namespace above it) if needed. The file must lie in the catalog's
//!   allowed locations and inside the table's own location, and is read and parsed as
//!   table metadata before anything changes.
//! - DROP forgets the table (never its files: they belong to the source). A DROP of a
//!   table that is not there changes nothing but its timestamp, as Polaris answers 204.
//! - VALIDATE changes nothing: it checks the catalog, the caller's privileges and that
//!   the location (a metadata file or a directory) is allowed.
//! - Order: each table keeps the timestamp of the last notification admitted, in the
//!   same store transaction as the change. A CREATE or UPDATE not newer is a 409
//!   (`AlreadyExistsException`, as in Polaris). Unlike Polaris, a DROP older than the
//!   last is refused too, and the timestamp outlives the table, so a late UPDATE cannot
//!   bring a dropped table back; dropping the namespace (or the catalog) clears it.
//! - Privileges: as Polaris, TABLE_CREATE, TABLE_WRITE_PROPERTIES, TABLE_DROP,
//!   NAMESPACE_CREATE and NAMESPACE_DROP on the catalog.

use super::error::{object_exists, object_missing, CatalogError, CatalogResult};
use super::locations::check_allowed;
use super::objects::{drop_event, identity, write_event, Identity, Registered};
use super::tables::table_registered;
use super::{Catalog, Outcome, RequestContext};
use crate::auth::privileges::{Privilege, Securable};
use crate::events::{Draft, Operation};
use crate::model::{CatalogRecord, CatalogType, Ident, Namespace, ObjectKind, Properties};
use crate::storage::{canonical_location, is_within};
use crate::store::{Mutation, NotificationStamp, ObjectWrite, StoreError, StoredObject};

/// What a notification says happened to the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotificationType {
    Create,
    Update,
    Drop,
    Validate,
}

/// A `NotificationRequest`, as the catalog needs it.
#[derive(Debug, Clone)]
pub struct Notification {
    pub kind: NotificationType,
    /// The sender's clock: each must be newer than the last admitted for the table.
    pub timestamp_ms: i64,
    pub metadata_location: String,
}

/// Which timestamps a notification needs, against the last one admitted for its table.
#[derive(Debug, Clone, Copy)]
enum Order {
    /// Newer: CREATE and UPDATE.
    Newer,
    /// Not older: a DROP as new as the last UPDATE goes through (Polaris does not order
    /// DROPs at all; its tests send one with the UPDATE's timestamp).
    NotOlder,
}

/// What Polaris asks of a notification's sender, on the catalog.
const PRIVILEGES: [Privilege; 5] = [
    Privilege::TABLE_CREATE,
    Privilege::TABLE_WRITE_PROPERTIES,
    Privilege::TABLE_DROP,
    Privilege::NAMESPACE_CREATE,
    Privilege::NAMESPACE_DROP,
];

fn out_of_order(ident: &Ident, admitted: i64) -> CatalogError {
    CatalogError::AlreadyExists(format!(
        "A notification with a newer timestamp has been admitted for table {ident} (the last admitted: {admitted})"
    ))
}

impl Order {
    /// Whether a notification at `timestamp_ms` may follow the last one admitted
    /// (`stamp`); `Err` names the one it is out of order with.
    fn admits(self, stamp: Option<i64>, timestamp_ms: i64, ident: &Ident) -> CatalogResult<()> {
        let refused = match self {
            Order::Newer => stamp.filter(|s| timestamp_ms <= *s),
            Order::NotOlder => stamp.filter(|s| timestamp_ms < *s),
        };
        match refused {
            Some(admitted) => Err(out_of_order(ident, admitted)),
            None => Ok(()),
        }
    }
}

impl Catalog {
    pub async fn send_notification(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
        notification: Notification,
    ) -> CatalogResult<()> {
        for privilege in PRIVILEGES {
            ctx.require(catalog, privilege, &Securable::Catalog)?;
        }
        let record = self.get_catalog(catalog).await?;
        if record.catalog_type != CatalogType::External {
            return Err(CatalogError::bad_request(format!(
                "Cannot update catalog {catalog} through notifications: it is INTERNAL (only an EXTERNAL catalog takes them)"
            )));
        }
        // Read fresh from the store, not from this node's model (up to a second old): a
        // catalog made federated on another node just now must not get local tables.
        if self
            .reload_security()
            .await?
            .state
            .federated
            .contains_key(catalog)
        {
            return Err(CatalogError::bad_request(format!(
                "Cannot update catalog {catalog} through notifications: it is federated, served from its remote catalog"
            )));
        }
        let location = &notification.metadata_location;
        match notification.kind {
            NotificationType::Validate => {
                check_allowed(&record, location)?;
                self.record_outcome(ctx, &Outcome::NoContent).await
            }
            NotificationType::Drop => {
                self.notified_drop(ctx, &record, ident, notification.timestamp_ms)
                    .await
            }
            NotificationType::Create | NotificationType::Update => {
                self.notified_write(ctx, &record, ident, &notification)
                    .await
            }
        }
    }

    async fn notified_write(
        &self,
        ctx: &RequestContext,
        record: &CatalogRecord,
        ident: &Ident,
        notification: &Notification,
    ) -> CatalogResult<()> {
        let location = notification.metadata_location.as_str();
        let (registered, table_location) = self
            .read_registered(record, location, |bytes| table_registered(location, bytes))
            .await?;
        if !is_within(
            &canonical_location(location)?,
            std::slice::from_ref(&table_location),
        ) {
            return Err(CatalogError::bad_request(format!(
                "Metadata file {location} is not inside its table's location {}",
                registered.location
            )));
        }
        let Registered {
            uuid,
            metadata: document,
            ..
        } = registered;
        let timestamp = notification.timestamp_ms;
        // Refused before its namespaces are made: an out-of-order one changes nothing
        // (`admit` asks again, with the change).
        let stamp = self.store.notification_stamp(record.id, ident).await?;
        Order::Newer.admits(stamp, timestamp, ident)?;
        self.create_missing_namespaces(ctx, record, &ident.namespace)
            .await?;

        self.admit(ctx, record, ident, timestamp, Order::Newer, |current| {
            let mut drafts = Vec::new();
            let expected = match current {
                Some(object) if object.kind == ObjectKind::Table => {
                    // Another table under this name (the source dropped and made it
                    // again): its history ends with a drop, as a register over it does.
                    let Identity { uuid: old, .. } = identity(object.kind, &object.metadata)?;
                    if old != uuid {
                        let before = &object.metadata_location;
                        drafts.push(drop_event(object.kind, ident, &old, before, false));
                    }
                    Some(object.metadata_location)
                }
                Some(object) => return Err(object_exists(ObjectKind::Table, object.kind, ident)),
                None => None,
            };
            let write = ObjectWrite {
                ident: ident.clone(),
                kind: ObjectKind::Table,
                expected_metadata_location: expected,
                metadata_location: location.to_string(),
                metadata: document.clone(),
                location: table_location.clone(),
                // As in Polaris, no overlap check: notifications are ordered per table
                // only, so a source's rename (or a table made again elsewhere under
                // another name) may arrive as the new name's CREATE before the old
                // name's DROP, at the same location. A facade never purges files.
                check_location: false,
            };
            drafts.push(write_event(Operation::RegisterTable, &write, &uuid));
            let commit = Mutation::CommitObjects {
                catalog: record.id,
                writes: vec![write],
            };
            Ok((commit, drafts))
        })
        .await
    }

    async fn notified_drop(
        &self,
        ctx: &RequestContext,
        record: &CatalogRecord,
        ident: &Ident,
        timestamp_ms: i64,
    ) -> CatalogResult<()> {
        self.admit(
            ctx,
            record,
            ident,
            timestamp_ms,
            Order::NotOlder,
            |current| match current {
                Some(object) if object.kind == ObjectKind::Table => {
                    let Identity { uuid, .. } = identity(object.kind, &object.metadata)?;
                    let before = &object.metadata_location;
                    let event = drop_event(object.kind, ident, &uuid, before, false);
                    let drop = Mutation::DropObject {
                        catalog: record.id,
                        kind: ObjectKind::Table,
                        ident: ident.clone(),
                        expected: object.metadata_location,
                        // The files and their history are the source catalog's.
                        retain: None,
                    };
                    Ok((drop, vec![event]))
                }
                Some(_) => Err(object_missing(ObjectKind::Table, ident)),
                // Nothing to drop: only the timestamp is kept, which orders later ones.
                None => Ok((Mutation::None, Vec::new())),
            },
        )
        .await
    }

    /// Admits a notification in `order` with the table's last: `change` makes the
    /// mutation and event drafts from the table as stored, and they commit with the
    /// timestamp (read again if another node admitted one meanwhile).
    async fn admit(
        &self,
        ctx: &RequestContext,
        record: &CatalogRecord,
        ident: &Ident,
        timestamp_ms: i64,
        order: Order,
        change: impl Fn(Option<StoredObject>) -> CatalogResult<(Mutation, Vec<Draft>)>,
    ) -> CatalogResult<()> {
        let _guards = self.commit_locks.lock(record.id, &[ident]).await;
        let attempts = self.settings.max_commit_attempts.max(1);
        for attempt in 1..=attempts {
            let stamp = self.store.notification_stamp(record.id, ident).await?;
            order.admits(stamp, timestamp_ms, ident)?;
            let (mutation, drafts) = change(self.store.load_object(&record.name, ident).await?)?;
            let events = self.events(ctx, Some((record.id, &record.name)), drafts);
            let mut batch = self.batch(ctx, mutation, &Outcome::NoContent, events);
            if let Mutation::DropObject { ident, .. } = &batch.mutation {
                let dropped = Securable::table(ident);
                self.grants_follow(&mut batch, &record.name, &dropped, None)
                    .await?;
            }
            batch.notification = Some(NotificationStamp {
                catalog: record.id,
                ident: ident.clone(),
                expected: stamp,
                timestamp_ms: stamp.map_or(timestamp_ms, |s| s.max(timestamp_ms)),
            });
            match self.apply(batch, None).await {
                Ok(_) => return Ok(()),
                // The table changed since it was read, without the stamp moving: a REST
                // drop or create on another node, or a DROP as old as the stamp. Read
                // both again, as for a lost swap (the answer in that order would have
                // been this notification's, not a 404 or 409).
                Err(
                    StoreError::Conflict
                    | StoreError::ObjectMissing { .. }
                    | StoreError::ObjectExists { .. },
                ) if attempt < attempts => continue,
                // Not a 409: a sender takes that for "out of order" and gives up.
                Err(StoreError::Conflict) => {
                    return Err(CatalogError::Unavailable(format!(
                        "Notifications for table {ident} kept losing to concurrent ones; retry"
                    )))
                }
                Err(e) => return Err(e.into()),
            }
        }
        unreachable!("the loop returns on its last attempt")
    }

    /// Makes each level of `namespace` that does not exist yet (the source's tree is
    /// mirrored as its tables arrive). Not under the request's idempotency key: the
    /// notification's own change carries it.
    async fn create_missing_namespaces(
        &self,
        ctx: &RequestContext,
        record: &CatalogRecord,
        namespace: &Namespace,
    ) -> CatalogResult<()> {
        let quiet = RequestContext {
            idempotency: None,
            ..ctx.clone()
        };
        let levels = namespace.levels();
        for depth in 1..=levels.len() {
            let level = Namespace::new(levels[..depth].to_vec())?;
            if self
                .namespace_properties(&record.name, &level)
                .await
                .is_ok()
            {
                continue;
            }
            match self
                .create_namespace(&quiet, &record.name, &level, Properties::new())
                .await
            {
                // Made by another notification meanwhile.
                Ok(_) | Err(CatalogError::AlreadyExists(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}
