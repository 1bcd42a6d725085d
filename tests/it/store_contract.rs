//! The contract every `Store` backend keeps, run against each of them: the embedded
//! store always, PostgreSQL when `FLOE_TEST_DATABASE_URL` is set (as `scripts/test-all.sh`
//! does; each test gets a fresh schema). A new backend passes this suite before it is
//! wired in.
//!
//! Each case is an `async fn(Arc<dyn Store>)`; `contract!` makes one test per backend.

use std::sync::Arc;

use floe::events::{seal, ChangeEvent, Draft, Operation, Origin};
use floe::model::{
    now_ms, CatalogId, CatalogRecord, CatalogType, Ident, Namespace, ObjectKind, Properties,
};
use floe::store::postgres::PostgresStore;
use floe::store::reservations::Reservation;
use floe::store::sqlite::SqliteStore;
use floe::store::{
    Applied, EventRead, IdempotencyRecord, Mutation, NotificationStamp, ObjectWrite, PageRequest,
    PendingPurge, PolicyWrite, Presence, Retention, Store, StoreError, StoredProperties,
    WriteBatch,
};

/// A store of each kind; the temporary directory lives as long as the store is used.
struct Backend {
    store: Arc<dyn Store>,
    _dir: Option<tempfile::TempDir>,
}

/// With its metadata cache on, as `floe serve` runs it: every case checks the cache too.
fn sqlite() -> Backend {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with_cache(&dir.path().join("catalog.db"), 1 << 20).unwrap();
    Backend {
        store: Arc::new(store),
        _dir: Some(dir),
    }
}

/// PostgreSQL, each write in a transaction of its own and each read on a connection of
/// its own.
async fn postgres() -> Option<Backend> {
    postgres_with(false, 0).await
}

/// PostgreSQL as `floe serve` runs it: group commit (`--db-group-commit`) and reads
/// pipelined on shared connections (`--db-read-connections`, at least one even on one
/// core); the same contract must hold.
async fn postgres_grouped() -> Option<Backend> {
    let shared = floe::store::postgres::default_read_connections();
    postgres_with(true, shared).await
}

async fn postgres_with(group_commit: bool, read_connections: usize) -> Option<Backend> {
    let settings = crate::common::postgres_for_test().await?;
    let settings = floe::store::postgres::PostgresSettings {
        group_commit,
        read_connections,
        ..settings
    };
    let store = PostgresStore::open(&settings).await.unwrap();
    Some(Backend {
        store: Arc::new(store),
        _dir: None,
    })
}

/// One test per backend for each case. Without `FLOE_TEST_DATABASE_URL` the PostgreSQL
/// test says it did not run (the test command runs this file again with it set).
macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        $(mod $case {
            #[tokio::test]
            async fn sqlite() {
                let backend = super::sqlite();
                super::$case(backend.store.clone()).await;
            }

            #[tokio::test]
            async fn postgres() {
                match super::postgres().await {
                    Some(backend) => super::$case(backend.store.clone()).await,
                    None => eprintln!("FLOE_TEST_DATABASE_URL not set: PostgreSQL not tested"),
                }
            }

            #[tokio::test]
            async fn postgres_grouped() {
                match super::postgres_grouped().await {
                    Some(backend) => super::$case(backend.store.clone()).await,
                    None => eprintln!("FLOE_TEST_DATABASE_URL not set: PostgreSQL not tested"),
                }
            }
        })*
    };
}

contract!(
    compare_and_swap_wins_then_conflicts,
    create_over_an_existing_name_fails,
    commit_on_a_missing_object_or_the_wrong_kind_fails,
    multi_object_writes_are_all_or_nothing,
    locations_may_not_overlap,
    generic_tables_without_a_location_overlap_nothing,
    staged_locations_are_held_until_they_expire,
    staged_holds_serve_their_table_until_its_commit_lands,
    lock_then_commit,
    lists_page_in_name_order,
    non_empty_namespaces_and_catalogs_cannot_be_dropped,
    namespaces_need_their_parent,
    renames_check_both_names,
    drops_return_the_pointer,
    namespace_and_catalog_updates_compare_and_swap,
    idempotency_keys_commit_with_the_change,
    reads_tell_a_missing_catalog,
    the_security_document_is_compare_and_swapped_with_the_change,
    policy_documents_are_per_catalog_and_swapped_with_the_change,
    notification_stamps_are_swapped_with_the_change,
    drops_and_renames_compare_and_swap,
    grants_hold_their_object_and_drops_see_new_grants,
    events_commit_with_their_change_or_not_at_all,
    event_positions_follow_commit_order,
    relay_leases_fence_other_holders,
    events_expire_only_once_relayed,
    dropped_objects_can_be_undropped_or_forgotten,
    purges_commit_with_their_change_and_stay_until_finished,
    purges_never_reach_a_dropped_object_kept_for_undrop,
    commits_hold_only_while_what_they_read_is_unchanged,
    concurrent_writes_fail_alone,
    loads_see_every_acknowledged_write,
    loads_return_the_current_document,
    enqueued_commits_build_on_each_other,
    lists_see_every_acknowledged_membership_change,
);

// ---------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------

const WAREHOUSE: &str = "file:///wh/";

fn ns(levels: &[&str]) -> Namespace {
    Namespace::new(levels.iter().map(|s| s.to_string()).collect()).unwrap()
}

fn ident(namespace: &[&str], name: &str) -> Ident {
    Ident::new(ns(namespace), name.to_string()).unwrap()
}

fn batch(mutation: Mutation) -> WriteBatch {
    WriteBatch::new(mutation, now_ms())
}

/// A catalog named `name` with a namespace `db`.
async fn catalog_with_db(store: &Arc<dyn Store>, name: &str) -> CatalogRecord {
    let record = CatalogRecord {
        id: CatalogId(rand_id()),
        name: name.to_string(),
        catalog_type: CatalogType::Internal,
        properties: Properties::from([("default-base-location".into(), WAREHOUSE.into())]),
        storage_config: serde_json::json!({"storageType": "FILE"}),
        connection: None,
        created_ms: now_ms(),
        updated_ms: now_ms(),
        version: 1,
    };
    store
        .write(batch(Mutation::CreateCatalog(record.clone())))
        .await
        .unwrap();
    create_namespace(store, record.id, &["db"]).await.unwrap();
    record
}

fn rand_id() -> i64 {
    (uuid::Uuid::new_v4().as_u128() >> 65) as i64 + 1
}

async fn create_namespace(
    store: &Arc<dyn Store>,
    catalog: CatalogId,
    levels: &[&str],
) -> Result<Applied, StoreError> {
    store
        .write(batch(Mutation::CreateNamespace {
            catalog,
            namespace: ns(levels),
            properties: Properties::new(),
        }))
        .await
}

/// A first write (create) of a table or view at `file:///wh/<location>/`.
fn create(kind: ObjectKind, ident: &Ident, location: &str) -> ObjectWrite {
    ObjectWrite {
        ident: ident.clone(),
        kind,
        expected_metadata_location: None,
        metadata_location: format!("{WAREHOUSE}{location}/metadata/00000.json"),
        metadata: format!("{{\"v\":0,\"name\":\"{}\"}}", ident.name),
        location: format!("{WAREHOUSE}{location}/"),
        check_location: true,
    }
}

/// A compare-and-swap from `expected` to version `version` of the same object.
fn update(previous: &ObjectWrite, expected: &str, version: u32) -> ObjectWrite {
    ObjectWrite {
        expected_metadata_location: Some(expected.to_string()),
        metadata_location: format!("{}metadata/{version:05}.json", previous.location),
        metadata: format!("{{\"v\":{version}}}"),
        check_location: false,
        ..previous.clone()
    }
}

async fn commit(
    store: &Arc<dyn Store>,
    catalog: CatalogId,
    writes: Vec<ObjectWrite>,
) -> Result<Applied, StoreError> {
    store
        .write(batch(Mutation::CommitObjects { catalog, writes }))
        .await
}

async fn pointer(store: &Arc<dyn Store>, catalog: &str, ident: &Ident) -> Option<String> {
    store
        .load_object(catalog, ident)
        .await
        .unwrap()
        .map(|o| o.metadata_location)
}

/// The names of the tables in a namespace (first page).
async fn tables_in(store: &Arc<dyn Store>, catalog: &str, namespace: &[&str]) -> Vec<String> {
    objects_in(store, catalog, namespace, ObjectKind::Table).await
}

/// The names of the tables or views in a namespace (first page).
async fn objects_in(
    store: &Arc<dyn Store>,
    catalog: &str,
    namespace: &[&str],
    kind: ObjectKind,
) -> Vec<String> {
    store
        .list_objects(catalog, &ns(namespace), kind, &PageRequest::default())
        .await
        .unwrap()
        .items
}

// ---------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------

async fn compare_and_swap_wins_then_conflicts(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let t = ident(&["db"], "t");
    let first = create(ObjectKind::Table, &t, "t");
    commit(&store, c.id, vec![first.clone()]).await.unwrap();
    let second = update(&first, &first.metadata_location, 1);
    // A committed commit hands its writes back (the catalog answers from them).
    assert_eq!(
        commit(&store, c.id, vec![second.clone()]).await.unwrap(),
        Applied::Committed(vec![second.clone()])
    );
    // A writer that read the first version loses, and changes nothing.
    let stale = update(&first, &first.metadata_location, 2);
    assert!(matches!(
        commit(&store, c.id, vec![stale]).await,
        Err(StoreError::Conflict)
    ));
    let loaded = store.load_object("c", &t).await.unwrap().unwrap();
    assert_eq!(loaded.metadata_location, second.metadata_location);
    assert_eq!(loaded.metadata, second.metadata);
    assert_eq!(loaded.kind, ObjectKind::Table);
}

async fn create_over_an_existing_name_fails(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let t = ident(&["db"], "t");
    let first = create(ObjectKind::Table, &t, "t");
    commit(&store, c.id, vec![first.clone()]).await.unwrap();
    for (kind, location) in [(ObjectKind::Table, "t2"), (ObjectKind::View, "v2")] {
        match commit(&store, c.id, vec![create(kind, &t, location)]).await {
            Err(StoreError::ObjectExists {
                wanted,
                existing: ObjectKind::Table,
                ident,
            }) => {
                assert_eq!(wanted, kind);
                assert_eq!(ident, t);
            }
            other => panic!("expected ObjectExists, got {other:?}"),
        }
    }
    assert_eq!(
        pointer(&store, "c", &t).await.as_deref(),
        Some(first.metadata_location.as_str())
    );
}

async fn commit_on_a_missing_object_or_the_wrong_kind_fails(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let t = ident(&["db"], "t");
    let table = create(ObjectKind::Table, &t, "t");
    let missing = update(
        &create(ObjectKind::Table, &ident(&["db"], "none"), "none"),
        "file:///wh/none/metadata/00000.json",
        1,
    );
    assert!(matches!(
        commit(&store, c.id, vec![missing]).await,
        Err(StoreError::ObjectMissing {
            kind: ObjectKind::Table,
            ..
        })
    ));
    commit(&store, c.id, vec![table.clone()]).await.unwrap();
    let as_view = ObjectWrite {
        kind: ObjectKind::View,
        ..update(&table, &table.metadata_location, 1)
    };
    assert!(matches!(
        commit(&store, c.id, vec![as_view]).await,
        Err(StoreError::ObjectMissing {
            kind: ObjectKind::View,
            ..
        })
    ));
    // A create in a namespace that does not exist.
    let orphan = create(ObjectKind::Table, &ident(&["nope"], "t"), "orphan");
    assert!(matches!(
        commit(&store, c.id, vec![orphan]).await,
        Err(StoreError::NamespaceMissing(_))
    ));
}

async fn multi_object_writes_are_all_or_nothing(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let (a, b) = (ident(&["db"], "a"), ident(&["db"], "b"));
    let b_first = create(ObjectKind::Table, &b, "b");
    commit(&store, c.id, vec![b_first.clone()]).await.unwrap();
    // One good write (create a, advance b) and one stale one (b again): nothing applies.
    let a_first = create(ObjectKind::Table, &a, "a");
    let b_next = update(&b_first, &b_first.metadata_location, 1);
    let b_stale = update(&b_first, "file:///wh/b/metadata/99999.json", 2);
    let c2 = ident(&["db"], "c2");
    let b_moved = ObjectWrite {
        ident: c2.clone(),
        ..b_stale
    };
    let result = commit(&store, c.id, vec![a_first.clone(), b_next, b_moved]).await;
    assert!(result.is_err(), "{result:?}");
    assert_eq!(pointer(&store, "c", &a).await, None);
    assert_eq!(
        pointer(&store, "c", &b).await.as_deref(),
        Some(b_first.metadata_location.as_str())
    );
    assert_eq!(pointer(&store, "c", &c2).await, None);
    // The same batch without the bad write applies whole.
    let b_next = update(&b_first, &b_first.metadata_location, 1);
    commit(&store, c.id, vec![a_first.clone(), b_next.clone()])
        .await
        .unwrap();
    assert_eq!(
        pointer(&store, "c", &b).await.as_deref(),
        Some(b_next.metadata_location.as_str())
    );
    assert!(pointer(&store, "c", &a).await.is_some());
}

async fn locations_may_not_overlap(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let t = ident(&["db"], "t");
    commit(&store, c.id, vec![create(ObjectKind::Table, &t, "a/t")])
        .await
        .unwrap();
    // Inside the table's location, and containing it: both refused.
    for (name, location) in [("inside", "a/t/x"), ("outside", "a")] {
        match commit(
            &store,
            c.id,
            vec![create(ObjectKind::View, &ident(&["db"], name), location)],
        )
        .await
        {
            Err(StoreError::LocationOverlap { other, .. }) => assert_eq!(other, t),
            other => panic!("{location}: expected LocationOverlap, got {other:?}"),
        }
        assert_eq!(pointer(&store, "c", &ident(&["db"], name)).await, None);
        // The same check alone, as a staged create asks it before anything is written.
        let other = ident(&["db"], name);
        let canonical = format!("{WAREHOUSE}{location}/");
        let alone = store.overlapping_object(c.id, &canonical, &other).await;
        assert_eq!(alone.unwrap(), Some(t.clone()), "{location}");
    }
    let own = format!("{WAREHOUSE}a/t/");
    assert_eq!(
        store.overlapping_object(c.id, &own, &t).await.unwrap(),
        None
    );
    let new = ident(&["db"], "new");
    let elsewhere = store
        .overlapping_object(c.id, &format!("{WAREHOUSE}a/t2/"), &new)
        .await;
    assert_eq!(elsewhere.unwrap(), None);
    // A sibling whose name merely starts with the same letters is fine.
    commit(
        &store,
        c.id,
        vec![create(
            ObjectKind::Table,
            &ident(&["db"], "sibling"),
            "a/t2",
        )],
    )
    .await
    .unwrap();
}

/// A staged create's location, held while its vended credentials live: no table or view
/// may be written in or around it but the staged create itself (its name and its
/// table-uuid), and no other staged create may hold it but a retry of the same name by
/// the same principal; refusals change nothing; a hold over any object's location is
/// refused; an expired hold holds nothing.
async fn staged_locations_are_held_until_they_expire(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let staged = ident(&["db"], "staged");
    let reserve = |who: &Ident, location: &str, uuid: &str, principal: &str, expires_ms| {
        batch(Mutation::ReserveLocation(Reservation {
            catalog: c.id,
            ident: who.clone(),
            location: format!("{WAREHOUSE}{location}/"),
            table_uuid: uuid.into(),
            principal: principal.into(),
            expires_ms,
            staged_ms: now_ms(),
        }))
    };
    let reserved_by = |got: Result<Applied, StoreError>, by: &Ident, what: &str| match got {
        Err(StoreError::LocationReserved { staged, .. }) => assert_eq!(&staged, by, "{what}"),
        got => panic!("{what}: expected LocationReserved, got {got:?}"),
    };
    let later = now_ms() + 600_000;
    let hold = reserve(&staged, "a/s", "u1", "alice", later);
    store.write(hold).await.unwrap();
    for (name, location) in [("at", "a/s"), ("inside", "a/s/x"), ("around", "a")] {
        let other = ident(&["db"], name);
        let created = commit(
            &store,
            c.id,
            vec![create(ObjectKind::Table, &other, location)],
        );
        reserved_by(created.await, &staged, location);
        assert_eq!(pointer(&store, "c", &other).await, None, "{location}");
        let held = store.write(reserve(&other, location, "u9", "alice", later));
        reserved_by(held.await, &staged, location);
    }
    // The staged create's own table: its name and its uuid. The same name with another
    // uuid (a plain create by whoever guessed the name) is refused.
    let own = |uuid: &str| ObjectWrite {
        metadata: format!(r#"{{"format-version":2,"table-uuid":"{uuid}"}}"#),
        ..create(ObjectKind::Table, &staged, "a/s")
    };
    for write in [create(ObjectKind::Table, &staged, "a/s"), own("u9")] {
        reserved_by(
            commit(&store, c.id, vec![write]).await,
            &staged,
            "same name",
        );
    }
    // Held again by another principal: refused; by the same one (a retry): the new uuid.
    let held = store.write(reserve(&staged, "a/s", "u2", "bob", later));
    reserved_by(held.await, &staged, "bob");
    let retry = reserve(&staged, "a/s", "u2", "alice", later + 1);
    store.write(retry).await.unwrap();
    reserved_by(commit(&store, c.id, vec![own("u1")]).await, &staged, "u1");
    assert_eq!(pointer(&store, "c", &staged).await, None);
    commit(&store, c.id, vec![own("u2")]).await.unwrap();
    // Refused holds hold nothing ("around" at a was not recorded); a sibling whose name
    // merely starts alike is free.
    let v = ident(&["db"], "v");
    commit(&store, c.id, vec![create(ObjectKind::View, &v, "a/t")])
        .await
        .unwrap();
    let sibling = create(ObjectKind::Table, &ident(&["db"], "sibling"), "a/s2");
    commit(&store, c.id, vec![sibling]).await.unwrap();
    // A hold over an object's location is refused, the same name's object's too (a
    // table created under the staged name since the staged create looked).
    for who in [ident(&["db"], "late"), v.clone()] {
        match store
            .write(reserve(&who, "a/t/x", "u3", "alice", later))
            .await
        {
            Err(StoreError::LocationOverlap { other, .. }) => assert_eq!(other, v),
            got => panic!("{who}: expected LocationOverlap, got {got:?}"),
        }
    }
    // Once expired, a hold holds nothing.
    let brief = ident(&["db"], "brief");
    let hold = reserve(&brief, "c", "u4", "alice", now_ms() + 2_000);
    store.write(hold).await.unwrap();
    let over = create(ObjectKind::Table, &ident(&["db"], "over"), "c/t");
    reserved_by(
        commit(&store, c.id, vec![over.clone()]).await,
        &brief,
        "brief",
    );
    tokio::time::sleep(std::time::Duration::from_millis(2_100)).await;
    commit(&store, c.id, vec![over]).await.unwrap();
}

/// What `/sign` and `/credentials` serve a staged table from: its live holds under that
/// name, until the staged create's own commit lands, which lands every hold of the name
/// (then never again, even when the same uuid holds it once more); a retry with a new
/// uuid serves again. An extension (the same uuid) keeps the first staging time.
async fn staged_holds_serve_their_table_until_its_commit_lands(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let staged = ident(&["db"], "staged");
    let hold = |uuid: &str, at: &str, expires_ms, staged_ms| Reservation {
        catalog: c.id,
        ident: staged.clone(),
        location: format!("{WAREHOUSE}{at}/"),
        table_uuid: uuid.into(),
        principal: "alice".into(),
        expires_ms,
        staged_ms,
    };
    let reserve = |r: &Reservation| store.write(batch(Mutation::ReserveLocation(r.clone())));
    let holds = || async {
        let mut holds = store.staged_holds(c.id, &staged, now_ms()).await.unwrap();
        holds.sort_by(|a, b| a.location.cmp(&b.location));
        holds
    };
    assert_eq!(holds().await, vec![]);
    let later = now_ms() + 600_000;
    // An earlier try elsewhere (another uuid), then the staged create that commits.
    let earlier = hold("u0", "a/old", later, 50);
    reserve(&earlier).await.unwrap();
    reserve(&hold("u1", "a/s", later, 100)).await.unwrap();
    assert_eq!(
        holds().await,
        vec![earlier.clone(), hold("u1", "a/s", later, 100)]
    );
    let other = ident(&["db"], "other");
    let none = store.staged_holds(c.id, &other, now_ms()).await.unwrap();
    assert_eq!(none, vec![]);
    // Extended: the later expiry, the first staging time; one past its expiry: nothing.
    reserve(&hold("u1", "a/s", later + 1_000, 999))
        .await
        .unwrap();
    let extended = hold("u1", "a/s", later + 1_000, 100);
    assert_eq!(holds().await, vec![earlier.clone(), extended.clone()]);
    let after = store.staged_holds(c.id, &staged, later + 1_000).await;
    assert_eq!(after.unwrap(), vec![]);
    // A refused commit lands nothing; the staged create's own commit lands every hold
    // of its name.
    let own = |uuid: &str| ObjectWrite {
        metadata: format!(r#"{{"format-version":2,"table-uuid":"{uuid}"}}"#),
        ..create(ObjectKind::Table, &staged, "a/s")
    };
    assert!(commit(&store, c.id, vec![own("u9")]).await.is_err());
    assert_eq!(holds().await, vec![earlier, extended]);
    commit(&store, c.id, vec![own("u1")]).await.unwrap();
    assert_eq!(holds().await, vec![]);
    // Holding it again (its own table is there now) is refused and serves nothing.
    let again = reserve(&hold("u1", "a/s", later + 2_000, 100)).await;
    assert!(matches!(again, Err(StoreError::LocationOverlap { .. })));
    assert_eq!(holds().await, vec![]);
    // Dropped: held again by the same uuid, it still serves nothing; a new staged create
    // (a new uuid) does, from its own staging time.
    let expected = pointer(&store, "c", &staged).await.unwrap();
    store
        .write(batch(Mutation::DropObject {
            catalog: c.id,
            kind: ObjectKind::Table,
            ident: staged.clone(),
            expected,
            retain: None,
        }))
        .await
        .unwrap();
    reserve(&hold("u1", "a/s", later + 2_000, 100))
        .await
        .unwrap();
    assert_eq!(holds().await, vec![]);
    let retry = hold("u2", "a/s", later + 3_000, 300);
    reserve(&retry).await.unwrap();
    assert_eq!(holds().await, vec![retry]);
}

/// A generic table may have no location (the catalog stores `""` and asks for no
/// check): it must block no other object's location, and others none of its own.
async fn generic_tables_without_a_location_overlap_nothing(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let unplaced = |name: &str| ObjectWrite {
        metadata_location: format!("generic-table:{name}"),
        location: String::new(),
        check_location: false,
        ..create(ObjectKind::GenericTable, &ident(&["db"], name), "unused")
    };
    commit(&store, c.id, vec![unplaced("g1"), unplaced("g2")])
        .await
        .unwrap();
    commit(
        &store,
        c.id,
        vec![create(ObjectKind::Table, &ident(&["db"], "t"), "a/t")],
    )
    .await
    .unwrap();
    // One with a location is checked as a table is.
    let inside = create(ObjectKind::GenericTable, &ident(&["db"], "g3"), "a/t/delta");
    match commit(&store, c.id, vec![inside]).await {
        Err(StoreError::LocationOverlap { other, .. }) => assert_eq!(other, ident(&["db"], "t")),
        other => panic!("expected LocationOverlap, got {other:?}"),
    }
    let generic = store
        .list_objects(
            "c",
            &ns(&["db"]),
            ObjectKind::GenericTable,
            &PageRequest::default(),
        )
        .await
        .unwrap()
        .items;
    assert_eq!(generic, vec!["g1", "g2"]);
    assert_eq!(tables_in(&store, "c", &["db"]).await, vec!["t"]);
    let g1 = store.load_object("c", &ident(&["db"], "g1")).await.unwrap();
    assert_eq!(g1.map(|o| o.kind), Some(ObjectKind::GenericTable));
}

async fn lock_then_commit(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let (t, new) = (ident(&["db"], "t"), ident(&["db"], "new"));
    let first = create(ObjectKind::Table, &t, "t");
    commit(&store, c.id, vec![first.clone()]).await.unwrap();
    let locked = store
        .lock_objects(c.id, &[t.clone(), new.clone()])
        .await
        .unwrap();
    assert_eq!(
        locked.current()[0]
            .as_ref()
            .map(|o| o.metadata_location.clone()),
        Some(first.metadata_location.clone())
    );
    assert!(locked.current()[1].is_none());
    let next = update(&first, &first.metadata_location, 1);
    let created = create(ObjectKind::Table, &new, "new");
    let applied = locked
        .write(batch(Mutation::CommitObjects {
            catalog: c.id,
            writes: vec![next.clone(), created.clone()],
        }))
        .await
        .unwrap();
    assert_eq!(applied, Applied::Committed(vec![next.clone(), created]));
    assert_eq!(
        pointer(&store, "c", &t).await.as_deref(),
        Some(next.metadata_location.as_str())
    );
    assert!(pointer(&store, "c", &new).await.is_some());
    // A lock dropped without writing releases the objects and changes nothing.
    let dropped = store
        .lock_objects(c.id, std::slice::from_ref(&t))
        .await
        .unwrap();
    drop(dropped);
    let after = update(&next, &next.metadata_location, 2);
    commit(&store, c.id, vec![after]).await.unwrap();
}

async fn lists_page_in_name_order(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    for name in ["n3", "n1", "n4", "n0", "n2"] {
        create_namespace(&store, c.id, &["db", name]).await.unwrap();
    }
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_namespaces(
                "c",
                &ns(&["db"]),
                &PageRequest {
                    after: after.clone(),
                    limit: Some(2),
                },
            )
            .await
            .unwrap();
        assert!(page.items.len() <= 2);
        seen.extend(page.items.iter().map(|n| n.last().to_string()));
        match page.next_after {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, ["n0", "n1", "n2", "n3", "n4"]);
    let all = store
        .list_namespaces("c", &Namespace::root(), &PageRequest::default())
        .await
        .unwrap();
    assert_eq!(all.items, vec![ns(&["db"])]);
    assert!(all.next_after.is_none());
    for name in ["b", "a", "c"] {
        commit(
            &store,
            c.id,
            vec![create(ObjectKind::Table, &ident(&["db"], name), name)],
        )
        .await
        .unwrap();
    }
    commit(
        &store,
        c.id,
        vec![create(ObjectKind::View, &ident(&["db"], "v"), "v")],
    )
    .await
    .unwrap();
    let page = store
        .list_objects(
            "c",
            &ns(&["db"]),
            ObjectKind::Table,
            &PageRequest {
                after: Some("a".into()),
                limit: Some(1),
            },
        )
        .await
        .unwrap();
    assert_eq!(page.items, ["b"]);
    assert_eq!(page.next_after.as_deref(), Some("b"));
    let views = store
        .list_objects("c", &ns(&["db"]), ObjectKind::View, &PageRequest::default())
        .await
        .unwrap();
    assert_eq!(views.items, ["v"]);
    assert!(matches!(
        store
            .list_objects(
                "c",
                &ns(&["none"]),
                ObjectKind::Table,
                &PageRequest::default()
            )
            .await,
        Err(StoreError::NamespaceMissing(_))
    ));
}

async fn non_empty_namespaces_and_catalogs_cannot_be_dropped(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let drop_ns = |levels: &'static [&'static str]| {
        batch(Mutation::DropNamespace {
            catalog: c.id,
            namespace: ns(levels),
        })
    };
    create_namespace(&store, c.id, &["db", "child"])
        .await
        .unwrap();
    assert!(matches!(
        store.write(drop_ns(&["db"])).await,
        Err(StoreError::NamespaceNotEmpty(_))
    ));
    store.write(drop_ns(&["db", "child"])).await.unwrap();
    commit(
        &store,
        c.id,
        vec![create(ObjectKind::View, &ident(&["db"], "v"), "v")],
    )
    .await
    .unwrap();
    assert!(matches!(
        store.write(drop_ns(&["db"])).await,
        Err(StoreError::NamespaceNotEmpty(_))
    ));
    let drop_catalog = || {
        batch(Mutation::DropCatalog {
            catalog: c.id,
            name: "c".into(),
        })
    };
    assert!(matches!(
        store.write(drop_catalog()).await,
        Err(StoreError::CatalogNotEmpty(_))
    ));
    assert!(store
        .get_namespace("c", &ns(&["db"]))
        .await
        .unwrap()
        .is_some());
    store
        .write(batch(Mutation::DropObject {
            catalog: c.id,
            kind: ObjectKind::View,
            ident: ident(&["db"], "v"),
            expected: format!("{WAREHOUSE}v/metadata/00000.json"),
            retain: None,
        }))
        .await
        .unwrap();
    store.write(drop_ns(&["db"])).await.unwrap();
    assert!(matches!(
        store.write(drop_ns(&["db"])).await,
        Err(StoreError::NamespaceMissing(_))
    ));
    store.write(drop_catalog()).await.unwrap();
    assert!(store.get_catalog("c").await.unwrap().is_none());
}

async fn namespaces_need_their_parent(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    assert!(matches!(
        create_namespace(&store, c.id, &["x", "y"]).await,
        Err(StoreError::NamespaceMissing(_))
    ));
    assert!(matches!(
        create_namespace(&store, c.id, &["db"]).await,
        Err(StoreError::NamespaceExists(_))
    ));
    assert!(store
        .get_namespace("c", &ns(&["x"]))
        .await
        .unwrap()
        .is_none());
    assert!(matches!(
        store
            .write(batch(Mutation::CreateCatalog(CatalogRecord {
                id: CatalogId(rand_id()),
                ..c.clone()
            })))
            .await,
        Err(StoreError::CatalogExists(_))
    ));
}

async fn renames_check_both_names(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let (t, v) = (ident(&["db"], "t"), ident(&["db"], "v"));
    commit(&store, c.id, vec![create(ObjectKind::Table, &t, "t")])
        .await
        .unwrap();
    commit(&store, c.id, vec![create(ObjectKind::View, &v, "v")])
        .await
        .unwrap();
    let rename = |kind, from: &Ident, to: &Ident| {
        batch(Mutation::RenameObject {
            catalog: c.id,
            kind,
            from: from.clone(),
            to: to.clone(),
            expected: format!("{WAREHOUSE}{}/metadata/00000.json", from.name),
        })
    };
    assert!(matches!(
        store
            .write(rename(ObjectKind::Table, &t, &ident(&["none"], "t")))
            .await,
        Err(StoreError::NamespaceMissing(_))
    ));
    assert!(matches!(
        store.write(rename(ObjectKind::Table, &t, &v)).await,
        Err(StoreError::RenameTargetExists {
            existing: ObjectKind::View,
            ..
        })
    ));
    assert!(matches!(
        store
            .write(rename(ObjectKind::View, &t, &ident(&["db"], "x")))
            .await,
        Err(StoreError::ObjectMissing { .. })
    ));
    let moved = ident(&["db"], "moved");
    store
        .write(rename(ObjectKind::Table, &t, &moved))
        .await
        .unwrap();
    assert_eq!(pointer(&store, "c", &t).await, None);
    assert!(pointer(&store, "c", &moved).await.is_some());
}

async fn drops_return_the_pointer(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let t = ident(&["db"], "t");
    let first = create(ObjectKind::Table, &t, "t");
    commit(&store, c.id, vec![first.clone()]).await.unwrap();
    let drop = |kind| {
        batch(Mutation::DropObject {
            catalog: c.id,
            kind,
            ident: t.clone(),
            expected: first.metadata_location.clone(),
            retain: None,
        })
    };
    assert!(matches!(
        store.write(drop(ObjectKind::View)).await,
        Err(StoreError::ObjectMissing { .. })
    ));
    match store.write(drop(ObjectKind::Table)).await.unwrap() {
        Applied::Dropped(object) => {
            assert_eq!(object.metadata_location, first.metadata_location);
            assert_eq!(object.metadata, first.metadata);
        }
        other => panic!("expected Dropped, got {other:?}"),
    }
    assert_eq!(pointer(&store, "c", &t).await, None);
}

async fn namespace_and_catalog_updates_compare_and_swap(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let props = |pairs: &[(&str, &str)]| -> Properties {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let update = |expected: &StoredProperties, properties: Properties| {
        batch(Mutation::update_namespace(
            c.id,
            ns(&["db"]),
            expected,
            properties,
        ))
    };
    let empty = StoredProperties::new(Properties::new());
    store
        .write(update(&empty, props(&[("a", "1")])))
        .await
        .unwrap();
    assert!(matches!(
        store.write(update(&empty, props(&[("b", "2")]))).await,
        Err(StoreError::Conflict)
    ));
    let read = store.get_namespace("c", &ns(&["db"])).await.unwrap();
    let read = read.expect("the namespace exists");
    assert_eq!(**read, props(&[("a", "1")]));
    assert_eq!(read.json(), r#"{"a":"1"}"#);
    // What a read for an update hands over is what the swap expects.
    let current = store.get_namespace_for_update("c", &ns(&["db"])).await;
    let current = current.unwrap().expect("the namespace exists");
    store
        .write(update(&current, props(&[("a", "1"), ("b", "2")])))
        .await
        .unwrap();
    let read = store.get_namespace("c", &ns(&["db"])).await.unwrap();
    assert_eq!(**read.unwrap(), props(&[("a", "1"), ("b", "2")]));
    // Properties large enough to be kept packed (the embedded store packs past 3 KiB, and
    // compares a packed value by its packed bytes first): the swap still compares what
    // they hold, a stale text of the same length included.
    let big = |c: char| -> Properties {
        [("big".to_string(), c.to_string().repeat(5000))]
            .into_iter()
            .collect()
    };
    let db = ns(&["db"]);
    let for_update = || store.get_namespace_for_update("c", &db);
    let before = for_update().await.unwrap().expect("the namespace exists");
    store.write(update(&before, big('x'))).await.unwrap();
    for stale in [StoredProperties::new(big('y')), (*before).clone()] {
        assert!(matches!(
            store.write(update(&stale, big('z'))).await,
            Err(StoreError::Conflict)
        ));
    }
    let read = store.get_namespace("c", &ns(&["db"])).await.unwrap();
    assert_eq!(**read.unwrap(), big('x'), "a refused swap changed nothing");
    let current = for_update().await.unwrap().expect("the namespace exists");
    store.write(update(&current, big('z'))).await.unwrap();
    let read = store.get_namespace("c", &ns(&["db"])).await.unwrap();
    assert_eq!(**read.unwrap(), big('z'));
    let missing = batch(Mutation::update_namespace(
        c.id,
        ns(&["none"]),
        &empty,
        Properties::new(),
    ));
    assert!(matches!(
        store.write(missing).await,
        Err(StoreError::NamespaceMissing(_))
    ));
    let next = CatalogRecord {
        version: 2,
        properties: props(&[("x", "y")]),
        ..c.clone()
    };
    let update_catalog = |expected_version| {
        batch(Mutation::UpdateCatalog {
            expected_version,
            record: next.clone(),
        })
    };
    store.write(update_catalog(1)).await.unwrap();
    assert!(matches!(
        store.write(update_catalog(1)).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(store.get_catalog("c").await.unwrap(), Some(next.clone()));
}

async fn idempotency_keys_commit_with_the_change(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let now = now_ms();
    let record = |key: &str, outcome: &str, expires_ms| IdempotencyRecord {
        key: key.into(),
        fingerprint: "f".into(),
        outcome: outcome.into(),
        expires_ms,
    };
    let with_key = |mutation, record: IdempotencyRecord| WriteBatch {
        idempotency: Some(record),
        ..batch(mutation)
    };
    let create_ns = |name: &str| Mutation::CreateNamespace {
        catalog: c.id,
        namespace: ns(&[name]),
        properties: Properties::new(),
    };
    store
        .write(with_key(
            create_ns("a"),
            record("k1", "first", now + 60_000),
        ))
        .await
        .unwrap();
    assert_eq!(
        store.idempotency_record("k1", now).await.unwrap(),
        Some(record("k1", "first", now + 60_000))
    );
    // The key is taken: the second change is not applied.
    assert!(matches!(
        store
            .write(with_key(
                create_ns("b"),
                record("k1", "second", now + 60_000)
            ))
            .await,
        Err(StoreError::IdempotencyKeyUsed)
    ));
    assert!(store
        .get_namespace("c", &ns(&["b"]))
        .await
        .unwrap()
        .is_none());
    // A failed change does not keep its key.
    assert!(store
        .write(with_key(create_ns("a"), record("k2", "dup", now + 60_000)))
        .await
        .is_err());
    assert_eq!(store.idempotency_record("k2", now).await.unwrap(), None);
    // An expired record counts as absent, may be taken over, and is purged.
    store
        .write(with_key(Mutation::None, record("old", "x", now - 1)))
        .await
        .unwrap();
    assert_eq!(store.idempotency_record("old", now).await.unwrap(), None);
    store
        .write(with_key(Mutation::None, record("old", "y", now + 60_000)))
        .await
        .unwrap();
    store
        .write(with_key(Mutation::None, record("gone", "z", now - 1)))
        .await
        .unwrap();
    assert_eq!(store.purge_expired_idempotency(now).await.unwrap(), 1);
    assert_eq!(
        store
            .idempotency_record("old", now)
            .await
            .unwrap()
            .map(|r| r.outcome),
        Some("y".into())
    );
}

async fn reads_tell_a_missing_catalog(store: Arc<dyn Store>) {
    catalog_with_db(&store, "c").await;
    let t = ident(&["db"], "t");
    assert!(matches!(
        store.load_object("none", &t).await,
        Err(StoreError::CatalogMissing(_))
    ));
    assert!(matches!(
        store.get_namespace("none", &ns(&["db"])).await,
        Err(StoreError::CatalogMissing(_))
    ));
    assert!(matches!(
        store
            .list_namespaces("none", &Namespace::root(), &PageRequest::default())
            .await,
        Err(StoreError::CatalogMissing(_))
    ));
    assert!(matches!(
        store
            .list_objects(
                "none",
                &ns(&["db"]),
                ObjectKind::Table,
                &PageRequest::default()
            )
            .await,
        Err(StoreError::CatalogMissing(_))
    ));
    assert_eq!(store.load_object("c", &t).await.unwrap(), None);
    assert!(store.ping().await.is_ok());
}

async fn the_security_document_is_compare_and_swapped_with_the_change(store: Arc<dyn Store>) {
    let empty = store.security().await.unwrap();
    assert_eq!((empty.version, empty.document.as_str()), (0, "{}"));
    let with_security = |mutation, expected, document: &str| WriteBatch {
        security: Some((expected, document.to_string())),
        ..batch(mutation)
    };
    store
        .write(with_security(Mutation::None, 0, "{\"v\":1}"))
        .await
        .unwrap();
    assert_eq!(store.security_version().await.unwrap(), 1);
    // A stale version, first write or later: refused, and the mutation with it.
    let record = CatalogRecord {
        id: CatalogId(rand_id()),
        name: "sec".into(),
        catalog_type: CatalogType::Internal,
        properties: Properties::new(),
        storage_config: serde_json::json!({"storageType": "FILE"}),
        connection: None,
        created_ms: 0,
        updated_ms: 0,
        version: 1,
    };
    for stale in [0, 7] {
        assert!(matches!(
            store
                .write(with_security(
                    Mutation::CreateCatalog(record.clone()),
                    stale,
                    "{}"
                ))
                .await,
            Err(StoreError::Conflict)
        ));
    }
    assert!(store.get_catalog("sec").await.unwrap().is_none());
    store
        .write(with_security(
            Mutation::CreateCatalog(record),
            1,
            "{\"v\":2}",
        ))
        .await
        .unwrap();
    let now = store.security().await.unwrap();
    assert_eq!((now.version, now.document.as_str()), (2, "{\"v\":2}"));
    assert!(store.get_catalog("sec").await.unwrap().is_some());
}

async fn notification_stamps_are_swapped_with_the_change(store: Arc<dyn Store>) {
    // An EXTERNAL catalog keeps its type.
    let mut c = catalog_with_db(&store, "c").await;
    c.catalog_type = CatalogType::External;
    c.id = CatalogId(rand_id());
    c.name = "mirror".into();
    store
        .write(batch(Mutation::CreateCatalog(c.clone())))
        .await
        .unwrap();
    create_namespace(&store, c.id, &["db"]).await.unwrap();
    let loaded = store.get_catalog("mirror").await.unwrap().unwrap();
    assert_eq!(loaded.catalog_type, CatalogType::External);
    assert_eq!(
        store.get_catalog("c").await.unwrap().unwrap().catalog_type,
        CatalogType::Internal
    );

    let t = ident(&["db"], "t");
    assert_eq!(store.notification_stamp(c.id, &t).await.unwrap(), None);
    let stamped = |mutation, expected, timestamp_ms| WriteBatch {
        notification: Some(NotificationStamp {
            catalog: c.id,
            ident: t.clone(),
            expected,
            timestamp_ms,
        }),
        ..batch(mutation)
    };
    let create = || Mutation::CreateNamespace {
        catalog: c.id,
        namespace: ns(&["db", "x"]),
        properties: Properties::new(),
    };
    store
        .write(stamped(Mutation::None, None, 10))
        .await
        .unwrap();
    assert_eq!(store.notification_stamp(c.id, &t).await.unwrap(), Some(10));
    // A stale expectation, first stamp or later: refused, and the mutation with it.
    for stale in [None, Some(9)] {
        assert!(matches!(
            store.write(stamped(create(), stale, 20)).await,
            Err(StoreError::Conflict)
        ));
    }
    assert!(store
        .get_namespace("mirror", &ns(&["db", "x"]))
        .await
        .unwrap()
        .is_none());
    store.write(stamped(create(), Some(10), 20)).await.unwrap();
    assert_eq!(store.notification_stamp(c.id, &t).await.unwrap(), Some(20));
    // Per table and per catalog.
    assert_eq!(
        store
            .notification_stamp(c.id, &ident(&["db"], "u"))
            .await
            .unwrap(),
        None
    );
    // Dropping the namespace forgets its tables' stamps; dropping the catalog, all.
    store
        .write(batch(Mutation::DropNamespace {
            catalog: c.id,
            namespace: ns(&["db", "x"]),
        }))
        .await
        .unwrap();
    assert_eq!(store.notification_stamp(c.id, &t).await.unwrap(), Some(20));
    store
        .write(batch(Mutation::DropNamespace {
            catalog: c.id,
            namespace: ns(&["db"]),
        }))
        .await
        .unwrap();
    assert_eq!(store.notification_stamp(c.id, &t).await.unwrap(), None);
    store
        .write(stamped(Mutation::None, None, 30))
        .await
        .unwrap();
    store
        .write(batch(Mutation::DropCatalog {
            catalog: c.id,
            name: "mirror".into(),
        }))
        .await
        .unwrap();
    assert_eq!(store.notification_stamp(c.id, &t).await.unwrap(), None);
    // A catalog that is gone takes no stamp.
    assert!(matches!(
        store.write(stamped(Mutation::None, None, 40)).await,
        Err(StoreError::Conflict)
    ));
}

async fn policy_documents_are_per_catalog_and_swapped_with_the_change(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let other = catalog_with_db(&store, "other").await;
    let empty = store.policies(c.id).await.unwrap();
    assert_eq!((empty.version, empty.document.as_str()), (0, "{}"));
    let with_policies = |mutation, catalog: CatalogId, expected, document: &str| WriteBatch {
        policies: Some(PolicyWrite {
            catalog,
            expected_version: expected,
            document: document.to_string(),
        }),
        ..batch(mutation)
    };
    store
        .write(with_policies(Mutation::None, c.id, 0, "{\"v\":1}"))
        .await
        .unwrap();
    // Another catalog's document is its own.
    assert_eq!(store.policies(other.id).await.unwrap().version, 0);
    store
        .write(with_policies(Mutation::None, other.id, 0, "{\"o\":1}"))
        .await
        .unwrap();
    // A stale version, first write or later: refused, and the mutation with it (here a
    // namespace's drop, which carries the document for this reason).
    let drop_db = || Mutation::DropNamespace {
        catalog: c.id,
        namespace: ns(&["db"]),
    };
    for stale in [0, 7] {
        assert!(matches!(
            store
                .write(with_policies(drop_db(), c.id, stale, "{}"))
                .await,
            Err(StoreError::Conflict)
        ));
    }
    assert!(store
        .list_namespaces("c", &Namespace::root(), &PageRequest::default())
        .await
        .unwrap()
        .items
        .contains(&ns(&["db"])));
    store
        .write(with_policies(drop_db(), c.id, 1, "{\"v\":2}"))
        .await
        .unwrap();
    let now = store.policies(c.id).await.unwrap();
    assert_eq!((now.version, now.document.as_str()), (2, "{\"v\":2}"));
    assert_eq!(
        store.policies(other.id).await.unwrap().document,
        "{\"o\":1}"
    );
    // Dropping a catalog drops its document.
    store
        .write(batch(Mutation::DropCatalog {
            catalog: c.id,
            name: "c".into(),
        }))
        .await
        .unwrap();
    assert_eq!(store.policies(c.id).await.unwrap().version, 0);
}

async fn drops_and_renames_compare_and_swap(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let t = ident(&["db"], "t");
    let first = create(ObjectKind::Table, &t, "t");
    commit(&store, c.id, vec![first.clone()]).await.unwrap();
    let second = update(&first, &first.metadata_location, 1);
    commit(&store, c.id, vec![second.clone()]).await.unwrap();
    // Both name the pointer as it was before the commit: another node moved it since.
    let stale_rename = batch(Mutation::RenameObject {
        catalog: c.id,
        kind: ObjectKind::Table,
        from: t.clone(),
        to: ident(&["db"], "u"),
        expected: first.metadata_location.clone(),
    });
    assert!(matches!(
        store.write(stale_rename).await,
        Err(StoreError::Conflict)
    ));
    let stale_drop = batch(Mutation::DropObject {
        catalog: c.id,
        kind: ObjectKind::Table,
        ident: t.clone(),
        expected: first.metadata_location.clone(),
        retain: None,
    });
    assert!(matches!(
        store.write(stale_drop).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(
        pointer(&store, "c", &t).await.as_deref(),
        Some(second.metadata_location.as_str())
    );
    assert_eq!(pointer(&store, "c", &ident(&["db"], "u")).await, None);
}

/// The two halves of grants following their objects: a grant commits only while its
/// object exists, or its policy document is as it was read (`present`), and a drop or rename that saw no grant commits only while
/// the security document is as it saw it (`security_seen`).
async fn grants_hold_their_object_and_drops_see_new_grants(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let t = ident(&["db"], "t");
    let first = create(ObjectKind::Table, &t, "t");
    commit(&store, c.id, vec![first.clone()]).await.unwrap();
    let grant = |present: Presence, expected: i64| WriteBatch {
        security: Some((expected, format!("{{\"v\":{}}}", expected + 1))),
        present: Some(present),
        ..batch(Mutation::None)
    };
    let on_object = |ident: &Ident, kinds: &[ObjectKind]| Presence::Object {
        catalog: c.id,
        ident: ident.clone(),
        kinds: kinds.to_vec(),
    };
    // Missing: another name, another kind, another namespace. Nothing changes.
    let missing = [
        on_object(&ident(&["db"], "u"), &[ObjectKind::Table]),
        on_object(&t, &[ObjectKind::View, ObjectKind::GenericTable]),
        Presence::Namespace {
            catalog: c.id,
            namespace: ns(&["nope"]),
        },
    ];
    for presence in missing {
        let refused = store.write(grant(presence.clone(), 0)).await;
        assert!(
            matches!(
                refused,
                Err(StoreError::ObjectMissing { .. } | StoreError::NamespaceMissing(_))
            ),
            "{presence:?}: {refused:?}"
        );
    }
    assert_eq!(store.security_version().await.unwrap(), 0);
    let in_db = Presence::Namespace {
        catalog: c.id,
        namespace: ns(&["db"]),
    };
    store.write(grant(in_db, 0)).await.unwrap();
    store
        .write(grant(on_object(&t, &[ObjectKind::Table]), 1))
        .await
        .unwrap();
    assert_eq!(store.security_version().await.unwrap(), 2);
    // A rename and a drop that saw an older document lose, and change nothing.
    let rename = |seen: i64| WriteBatch {
        security_seen: Some(seen),
        ..batch(Mutation::RenameObject {
            catalog: c.id,
            kind: ObjectKind::Table,
            from: t.clone(),
            to: ident(&["db"], "u"),
            expected: first.metadata_location.clone(),
        })
    };
    let drop = |ident: &Ident, seen: i64| WriteBatch {
        security_seen: Some(seen),
        ..batch(Mutation::DropObject {
            catalog: c.id,
            kind: ObjectKind::Table,
            ident: ident.clone(),
            expected: first.metadata_location.clone(),
            retain: None,
        })
    };
    assert!(matches!(
        store.write(rename(1)).await,
        Err(StoreError::Conflict)
    ));
    assert!(matches!(
        store.write(drop(&t, 1)).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(
        pointer(&store, "c", &t).await.as_deref(),
        Some(first.metadata_location.as_str())
    );
    // With the document they saw: both commit.
    store.write(rename(2)).await.unwrap();
    let u = ident(&["db"], "u");
    assert_eq!(pointer(&store, "c", &t).await, None);
    store.write(drop(&u, 2)).await.unwrap();
    assert_eq!(pointer(&store, "c", &u).await, None);
    // Now gone, it can hold no new grant.
    assert!(matches!(
        store
            .write(grant(on_object(&u, &[ObjectKind::Table]), 2))
            .await,
        Err(StoreError::ObjectMissing { .. })
    ));
    assert_eq!(store.security_version().await.unwrap(), 2);
    // A policy grant holds its catalog's policy document at the version it read: none
    // yet (0), then 1 once written; any other version loses, changing nothing.
    let policies = |catalog: CatalogId, version: i64| Presence::Policies { catalog, version };
    store.write(grant(policies(c.id, 0), 2)).await.unwrap();
    store
        .write(WriteBatch {
            policies: Some(PolicyWrite {
                catalog: c.id,
                expected_version: 0,
                document: "{}".into(),
            }),
            ..batch(Mutation::None)
        })
        .await
        .unwrap();
    for stale in [policies(c.id, 0), policies(c.id, 2)] {
        assert!(
            matches!(
                store.write(grant(stale.clone(), 3)).await,
                Err(StoreError::Conflict)
            ),
            "{stale:?}"
        );
    }
    assert_eq!(store.security_version().await.unwrap(), 3);
    store.write(grant(policies(c.id, 1), 3)).await.unwrap();
    assert_eq!(store.security_version().await.unwrap(), 4);
}

fn events_for(catalog: &CatalogRecord, drafts: Vec<Draft>) -> Vec<ChangeEvent> {
    let origin = Origin {
        principal: "tester".into(),
        request_id: uuid::Uuid::now_v7().to_string(),
        time_ms: now_ms(),
    };
    seal(&origin, Some((catalog.id, &catalog.name)), drafts)
}

async fn all_events(store: &Arc<dyn Store>) -> Vec<floe::events::StoredEvent> {
    store
        .read_events(&EventRead {
            after: 0,
            catalog: None,
            limit: 10_000,
            max_bytes: usize::MAX,
        })
        .await
        .unwrap()
}

async fn events_commit_with_their_change_or_not_at_all(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    assert_eq!(store.event_bounds().await.unwrap(), (1, 0));
    let t = ident(&["db"], "t");
    let first = create(ObjectKind::Table, &t, "t");
    let mut create_batch = batch(Mutation::CommitObjects {
        catalog: c.id,
        writes: vec![first.clone()],
    });
    create_batch.events = events_for(&c, vec![Draft::object(Operation::CreateTable, &t, "u1")]);
    store.write(create_batch.clone()).await.unwrap();
    // The same create again fails, and its event with it.
    let mut again = create_batch.clone();
    again.events = events_for(&c, vec![Draft::object(Operation::CreateTable, &t, "u1")]);
    assert!(store.write(again).await.is_err());
    // A multi-object write whose second compare-and-swap fails: neither change nor
    // either event.
    let v = ident(&["db"], "v");
    let mut failing = batch(Mutation::CommitObjects {
        catalog: c.id,
        writes: vec![
            create(ObjectKind::View, &v, "v"),
            update(&first, "file:///wh/stale.json", 1),
        ],
    });
    failing.events = events_for(
        &c,
        vec![
            Draft::object(Operation::CreateView, &v, "u2"),
            Draft::object(Operation::UpdateTable, &t, "u1"),
        ],
    );
    assert!(matches!(
        store.write(failing).await,
        Err(StoreError::Conflict)
    ));
    let mut commit_batch = batch(Mutation::CommitObjects {
        catalog: c.id,
        writes: vec![update(&first, &first.metadata_location, 1)],
    });
    commit_batch.events = events_for(&c, vec![Draft::object(Operation::UpdateTable, &t, "u1")]);
    store.write(commit_batch.clone()).await.unwrap();

    let events = all_events(&store).await;
    let summary: Vec<(i64, i64, &str)> = events
        .iter()
        .map(|e| (e.position, e.sequence, e.operation.as_str()))
        .collect();
    assert_eq!(
        summary,
        vec![(1, 1, "create-table"), (2, 2, "update-table")]
    );
    assert_eq!(events[0].id, create_batch.events[0].id);
    assert_eq!(events[0].body, create_batch.events[0].body);
    assert_eq!(events[1].id, commit_batch.events[0].id);
    assert!(events
        .iter()
        .all(|e| e.catalog_id == c.id && e.entity == "object:u1"));
    assert_eq!(store.event_bounds().await.unwrap(), (1, 2));
    // Reads resume after a position, per catalog or for all.
    let after_first = store
        .read_events(&EventRead {
            after: 1,
            catalog: Some(c.id),
            limit: 10,
            max_bytes: usize::MAX,
        })
        .await
        .unwrap();
    assert_eq!(after_first.len(), 1);
    let other = store
        .read_events(&EventRead {
            after: 0,
            catalog: Some(CatalogId(c.id.0 ^ 1)),
            limit: 10,
            max_bytes: usize::MAX,
        })
        .await
        .unwrap();
    assert!(other.is_empty());
    // A read stops after the event that takes it past its bytes, and reads one at least.
    let first_bytes = events[0].body.len();
    for (catalog, max_bytes, expected) in [
        (None, 0, 1),
        (None, first_bytes, 1),
        (Some(c.id), first_bytes, 1),
        (None, first_bytes + 1, 2),
        (Some(c.id), first_bytes + 1, 2),
    ] {
        let read = store
            .read_events(&EventRead {
                after: 0,
                catalog,
                limit: 10,
                max_bytes,
            })
            .await
            .unwrap();
        let positions: Vec<i64> = read.iter().map(|e| e.position).collect();
        assert_eq!(positions, vec![1, 2][..expected], "{catalog:?} {max_bytes}");
    }
}

async fn event_positions_follow_commit_order(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    const WRITERS: usize = 8;
    const EACH: usize = 10;
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let (store, c) = (store.clone(), c.clone());
        tasks.push(tokio::spawn(async move {
            let t = ident(&["db"], &format!("t{w}"));
            let mut current = create(ObjectKind::Table, &t, &format!("t{w}"));
            let mut b = batch(Mutation::CommitObjects {
                catalog: c.id,
                writes: vec![current.clone()],
            });
            let uuid = format!("u{w}");
            b.events = events_for(&c, vec![Draft::object(Operation::CreateTable, &t, &uuid)]);
            store.write(b).await.unwrap();
            for version in 1..EACH as u32 {
                let next = update(&current, &current.metadata_location, version);
                let mut b = batch(Mutation::CommitObjects {
                    catalog: c.id,
                    writes: vec![next.clone()],
                });
                // A namespace-wide event too: two entities in one batch.
                b.events = events_for(
                    &c,
                    vec![
                        Draft::object(Operation::UpdateTable, &t, &uuid),
                        Draft::namespace(Operation::UpdateNamespaceProperties, c.id, &ns(&["db"])),
                    ],
                );
                store.write(b).await.unwrap();
                current = next;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let events = all_events(&store).await;
    let total = WRITERS * (1 + 2 * (EACH - 1));
    assert_eq!(events.len(), total);
    // Gap-free, and every entity's sequence counts up in position order.
    let mut next_seq = std::collections::HashMap::new();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.position, i as i64 + 1);
        let expected = next_seq.entry(e.entity.clone()).or_insert(1);
        assert_eq!(e.sequence, *expected, "entity {}", e.entity);
        *expected += 1;
    }
    assert_eq!(
        next_seq[&format!("namespace:{}:db", c.id.0)],
        (WRITERS * (EACH - 1)) as i64 + 1
    );
}

async fn relay_leases_fence_other_holders(store: Arc<dyn Store>) {
    let now = now_ms();
    assert_eq!(
        store.claim_relay("r", "a", now, now + 1000).await.unwrap(),
        Some(0)
    );
    // Held by a: b must wait; a renews.
    assert_eq!(
        store.claim_relay("r", "b", now, now + 1000).await.unwrap(),
        None
    );
    assert_eq!(
        store.claim_relay("r", "a", now, now + 2000).await.unwrap(),
        Some(0)
    );
    assert!(store.confirm_relay("r", "a", 5, now + 2000).await.unwrap());
    assert!(!store.confirm_relay("r", "b", 9, now + 2000).await.unwrap());
    // Another relay name is independent.
    assert_eq!(
        store
            .claim_relay("other", "b", now, now + 1000)
            .await
            .unwrap(),
        Some(0)
    );
    // After a's lease lapsed, b takes over from a's confirmed position; a is fenced off.
    let later = now + 3000;
    assert_eq!(
        store
            .claim_relay("r", "b", later, later + 1000)
            .await
            .unwrap(),
        Some(5)
    );
    assert!(!store
        .confirm_relay("r", "a", 7, later + 1000)
        .await
        .unwrap());
    assert_eq!(
        store
            .claim_relay("r", "a", later, later + 1000)
            .await
            .unwrap(),
        None
    );
    // A confirmed position never goes back.
    assert!(store
        .confirm_relay("r", "b", 3, later + 1000)
        .await
        .unwrap());
    assert_eq!(
        store
            .claim_relay("r", "b", later, later + 1000)
            .await
            .unwrap(),
        Some(5)
    );
}

async fn events_expire_only_once_relayed(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let old = now_ms() - 100_000;
    for i in 0..4 {
        let mut b = batch(Mutation::CreateNamespace {
            catalog: c.id,
            namespace: ns(&[&format!("n{i}")]),
            properties: Properties::new(),
        });
        b.events = events_for(
            &c,
            vec![Draft::namespace(
                Operation::CreateNamespace,
                c.id,
                &ns(&[&format!("n{i}")]),
            )],
        );
        for e in &mut b.events {
            e.time_ms = old;
        }
        store.write(b).await.unwrap();
    }
    let now = now_ms();
    // A live relay that confirmed up to 2 holds back 3 and 4.
    store
        .claim_relay("r", "a", now, now + 60_000)
        .await
        .unwrap();
    store
        .confirm_relay("r", "a", 2, now + 60_000)
        .await
        .unwrap();
    assert_eq!(store.purge_events(now - 1000).await.unwrap(), 2);
    assert_eq!(store.event_bounds().await.unwrap(), (3, 4));
    // Recent events stay whatever the relays did.
    assert_eq!(store.purge_events(old).await.unwrap(), 0);
    store
        .confirm_relay("r", "a", 4, now + 60_000)
        .await
        .unwrap();
    assert_eq!(store.purge_events(now - 1000).await.unwrap(), 2);
    // Positions are never reused after the log was emptied.
    assert_eq!(store.event_bounds().await.unwrap(), (5, 4));
    let mut b = batch(Mutation::None);
    b.events = events_for(
        &c,
        vec![Draft::catalog(Operation::UpdateCatalog, c.id, "c")],
    );
    store.write(b).await.unwrap();
    assert_eq!(all_events(&store).await[0].position, 5);
    // Event times are stamped before commit, so they need not rise with positions: an
    // old event behind a newer one stays until the newer one goes too. Retention
    // deletes only a prefix of the log; a gap would let a consumer resuming before it
    // skip the deleted event without the 410 a deleted prefix gives.
    for time_ms in [old + 1000, old] {
        let mut b = batch(Mutation::None);
        b.events = events_for(
            &c,
            vec![Draft::catalog(Operation::UpdateCatalog, c.id, "c")],
        );
        b.events[0].time_ms = time_ms;
        store.write(b).await.unwrap();
    }
    store
        .confirm_relay("r", "a", 7, now + 60_000)
        .await
        .unwrap();
    assert_eq!(store.purge_events(old + 500).await.unwrap(), 0);
    assert_eq!(store.event_bounds().await.unwrap(), (5, 7));
}

async fn dropped_objects_can_be_undropped_or_forgotten(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let t = ident(&["db"], "t");
    let first = create(ObjectKind::Table, &t, "t");
    commit(&store, c.id, vec![first.clone()]).await.unwrap();
    let now = now_ms();
    let drop = |id: &str, expires_ms: i64| {
        batch(Mutation::DropObject {
            catalog: c.id,
            kind: ObjectKind::Table,
            ident: t.clone(),
            expected: first.metadata_location.clone(),
            retain: Some(Retention {
                id: id.to_string(),
                purge: true,
                dropped_ms: now,
                expires_ms,
            }),
        })
    };
    store.write(drop("d1", now + 60_000)).await.unwrap();
    assert_eq!(pointer(&store, "c", &t).await, None);
    let listed = store.list_dropped("c").await.unwrap();
    assert_eq!(listed.len(), 1);
    let d = &listed[0];
    assert_eq!(
        (d.id.as_str(), d.kind, &d.ident),
        ("d1", ObjectKind::Table, &t)
    );
    assert_eq!(d.metadata_location, first.metadata_location);
    assert_eq!(d.location, first.location);
    assert!(d.purge);
    assert_eq!(store.get_dropped("d1").await.unwrap().as_ref(), Some(d));
    assert!(matches!(
        store.list_dropped("nope").await,
        Err(StoreError::CatalogMissing(_))
    ));
    // The name is free: another table takes it; undrop onto it fails and changes nothing.
    let other = create(ObjectKind::Table, &t, "t2");
    commit(&store, c.id, vec![other.clone()]).await.unwrap();
    let undrop = |id: &str, to: &Ident| {
        batch(Mutation::Undrop {
            catalog: c.id,
            id: id.to_string(),
            write: ObjectWrite {
                ident: to.clone(),
                ..first.clone()
            },
        })
    };
    assert!(matches!(
        store.write(undrop("d1", &t)).await,
        Err(StoreError::ObjectExists { .. })
    ));
    assert!(store.get_dropped("d1").await.unwrap().is_some());
    // Under a new name it comes back, once.
    let back = ident(&["db"], "back");
    store.write(undrop("d1", &back)).await.unwrap();
    assert_eq!(
        pointer(&store, "c", &back).await.as_deref(),
        Some(first.metadata_location.as_str())
    );
    assert!(matches!(
        store.write(undrop("d1", &ident(&["db"], "again"))).await,
        Err(StoreError::DroppedMissing(_))
    ));
    assert!(store.list_dropped("c").await.unwrap().is_empty());
    // Expired ones are listed for the expirer, then forgotten.
    let mut drop_back = drop("d2", now - 1);
    if let Mutation::DropObject { ident, .. } = &mut drop_back.mutation {
        *ident = back.clone();
    }
    store.write(drop_back).await.unwrap();
    let expired = store.expired_dropped(now, 10).await.unwrap();
    assert_eq!(
        expired.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        vec!["d2"]
    );
    match store
        .write(batch(Mutation::ForgetDropped { id: "d2".into() }))
        .await
        .unwrap()
    {
        Applied::Forgotten(d) => assert_eq!(d.ident, back),
        other => panic!("expected Forgotten, got {other:?}"),
    }
    assert!(store.expired_dropped(now, 10).await.unwrap().is_empty());
    assert!(matches!(
        store
            .write(batch(Mutation::ForgetDropped { id: "d2".into() }))
            .await,
        Err(StoreError::DroppedMissing(_))
    ));
}

/// A purge is recorded with the change that asks for it (or not at all, if the change
/// fails), is due from its `next_ms`, and stays until a round finishes it.
async fn purges_commit_with_their_change_and_stay_until_finished(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let t = ident(&["db"], "t");
    let first = create(ObjectKind::Table, &t, "t");
    commit(&store, c.id, vec![first.clone()]).await.unwrap();
    let now = now_ms();
    let purge = |id: &str| PendingPurge {
        id: id.to_string(),
        catalog: c.id,
        location: "file:///wh/db/t".into(),
        created_ms: now,
        attempts: 0,
        next_ms: now,
    };
    let ids =
        |purges: Vec<PendingPurge>| -> Vec<String> { purges.into_iter().map(|p| p.id).collect() };
    // A change that fails records no purge.
    let mut failed = batch(Mutation::ForgetDropped { id: "none".into() });
    failed.purge = Some(purge("p0"));
    assert!(matches!(
        store.write(failed).await,
        Err(StoreError::DroppedMissing(_))
    ));
    assert!(store.due_purges(now + 1, 10).await.unwrap().is_empty());
    // A drop records its purge, due from its next_ms.
    let mut drop = batch(Mutation::DropObject {
        catalog: c.id,
        kind: ObjectKind::Table,
        ident: t.clone(),
        expected: first.metadata_location.clone(),
        retain: None,
    });
    drop.purge = Some(purge("p1"));
    store.write(drop).await.unwrap();
    assert!(store.due_purges(now - 1, 10).await.unwrap().is_empty());
    assert_eq!(store.due_purges(now, 10).await.unwrap(), vec![purge("p1")]);
    // Nothing is created where it is deleting files (at, inside or around its location),
    // and the refusal changes nothing; a sibling whose name merely starts alike is fine.
    for (name, location) in [("at", "db/t"), ("inside", "db/t/sub"), ("around", "db")] {
        let refused = create(ObjectKind::Table, &ident(&["db"], name), location);
        assert!(
            matches!(
                commit(&store, c.id, vec![refused]).await,
                Err(StoreError::LocationPurging { .. })
            ),
            "{location}"
        );
        assert_eq!(pointer(&store, "c", &ident(&["db"], name)).await, None);
    }
    let sibling = create(ObjectKind::Table, &ident(&["db"], "t2"), "db/t2");
    commit(&store, c.id, vec![sibling]).await.unwrap();
    // And no purge is recorded where a table or view lies (it would delete its files).
    let mut over_sibling = batch(Mutation::None);
    over_sibling.purge = Some(PendingPurge {
        location: "file:///wh/db/t2".into(),
        ..purge("p-sibling")
    });
    store.write(over_sibling).await.unwrap();
    assert_eq!(ids(store.due_purges(now, 10).await.unwrap()), vec!["p1"]);
    // Deferred after a failure: due again only later, with its attempts counted.
    store
        .write(batch(Mutation::DeferPurge {
            id: "p1".into(),
            attempts: 2,
            next_ms: now + 60_000,
        }))
        .await
        .unwrap();
    assert!(store.due_purges(now, 10).await.unwrap().is_empty());
    let later = store.due_purges(now + 60_000, 10).await.unwrap();
    assert_eq!(ids(later.clone()), vec!["p1"]);
    assert_eq!((later[0].attempts, later[0].next_ms), (2, now + 60_000));
    // Finished: gone; finishing or deferring it again changes nothing and is no error.
    store
        .write(batch(Mutation::FinishPurge { id: "p1".into() }))
        .await
        .unwrap();
    for again in [
        Mutation::FinishPurge { id: "p1".into() },
        Mutation::DeferPurge {
            id: "p1".into(),
            attempts: 1,
            next_ms: now,
        },
    ] {
        store.write(batch(again)).await.unwrap();
    }
    assert!(store.due_purges(i64::MAX, 10).await.unwrap().is_empty());
}

/// A table made at a dropped one's location and dropped in turn: while either is kept
/// for undrop, the other's purge is not recorded (it would delete the kept one's files,
/// and its undrop would then point at nothing); the last one's purge is.
async fn purges_never_reach_a_dropped_object_kept_for_undrop(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let now = now_ms();
    let drop_kept = |write: &ObjectWrite, id: &str| {
        batch(Mutation::DropObject {
            catalog: c.id,
            kind: ObjectKind::Table,
            ident: write.ident.clone(),
            expected: write.metadata_location.clone(),
            retain: Some(Retention {
                id: id.to_string(),
                purge: true,
                dropped_ms: now,
                expires_ms: now + 60_000,
            }),
        })
    };
    let forget = |id: &str, location: &str| {
        let mut forget = batch(Mutation::ForgetDropped { id: id.into() });
        forget.purge = Some(PendingPurge {
            id: format!("p-{id}"),
            catalog: c.id,
            location: format!("{WAREHOUSE}{location}"),
            created_ms: now,
            attempts: 0,
            next_ms: now,
        });
        forget
    };
    let due = || async { store.due_purges(now, 10).await.unwrap() };
    // `a` at db/t, dropped and kept; `b` made at the same place, dropped and kept too;
    // `inner` inside that location, dropped and kept.
    let t = ident(&["db"], "t");
    let a = create(ObjectKind::Table, &t, "db/t");
    commit(&store, c.id, vec![a.clone()]).await.unwrap();
    store.write(drop_kept(&a, "ka")).await.unwrap();
    let b = ObjectWrite {
        metadata_location: format!("{WAREHOUSE}db/t/metadata/00001.json"),
        ..create(ObjectKind::Table, &t, "db/t")
    };
    commit(&store, c.id, vec![b.clone()]).await.unwrap();
    store.write(drop_kept(&b, "kb")).await.unwrap();
    // Forgetting `a` with its purge: the record goes, no purge is recorded.
    store.write(forget("ka", "db/t")).await.unwrap();
    assert!(due().await.is_empty());
    assert!(store.get_dropped("ka").await.unwrap().is_none());
    // Once nothing else is kept there, forgetting the last one records its purge.
    store.write(forget("kb", "db/t")).await.unwrap();
    let ids =
        |purges: Vec<PendingPurge>| -> Vec<String> { purges.into_iter().map(|p| p.id).collect() };
    assert_eq!(ids(due().await), vec!["p-kb"]);
    store
        .write(batch(Mutation::FinishPurge { id: "p-kb".into() }))
        .await
        .unwrap();
    // A kept one inside the location, or around it, holds a purge of it off as well.
    let inner = create(ObjectKind::Table, &ident(&["db"], "inner"), "db/t/inner");
    let around = create(ObjectKind::Table, &ident(&["db"], "around"), "db");
    for (write, id) in [(&inner, "ki"), (&around, "kr")] {
        commit(&store, c.id, vec![write.clone()]).await.unwrap();
        store.write(drop_kept(write, id)).await.unwrap();
        let mut purge = batch(Mutation::None);
        purge.purge = forget(id, "db/t").purge;
        store.write(purge).await.unwrap();
        assert!(due().await.is_empty(), "{id}");
        store
            .write(batch(Mutation::ForgetDropped { id: id.into() }))
            .await
            .unwrap();
    }
    // A sibling whose name merely starts alike does not.
    let sibling = create(ObjectKind::Table, &ident(&["db"], "t2"), "db/t2");
    commit(&store, c.id, vec![sibling.clone()]).await.unwrap();
    store.write(drop_kept(&sibling, "ks")).await.unwrap();
    let mut purge = batch(Mutation::None);
    purge.purge = forget("t", "db/t").purge;
    store.write(purge).await.unwrap();
    assert_eq!(ids(due().await), vec!["p-t"]);
}

/// A multi-object commit carries what it read of the objects it does not write: it
/// commits only if they are still so, and a refusal changes nothing.
async fn commits_hold_only_while_what_they_read_is_unchanged(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let (a, b, x) = (
        ident(&["db"], "a"),
        ident(&["db"], "b"),
        ident(&["db"], "x"),
    );
    let a0 = create(ObjectKind::Table, &a, "a");
    let b0 = create(ObjectKind::Table, &b, "b");
    commit(&store, c.id, vec![a0.clone(), b0.clone()])
        .await
        .unwrap();
    let read = |ident: &Ident, at: Option<&str>| floe::store::Unchanged {
        catalog: c.id,
        ident: ident.clone(),
        metadata_location: at.map(str::to_string),
    };
    let write_b = |expected: &ObjectWrite, version, unchanged| {
        let mut batch = batch(Mutation::CommitObjects {
            catalog: c.id,
            writes: vec![update(expected, &expected.metadata_location, version)],
        });
        batch.unchanged = unchanged;
        batch
    };
    // `a` as read, `x` absent as read: `b` commits.
    let b1 = update(&b0, &b0.metadata_location, 1);
    store
        .write(write_b(
            &b0,
            1,
            vec![read(&a, Some(&a0.metadata_location)), read(&x, None)],
        ))
        .await
        .unwrap();
    assert_eq!(
        pointer(&store, "c", &b).await,
        Some(b1.metadata_location.clone())
    );
    // `a` moved on since it was read, or `x` made since: refused, `b` unchanged.
    let a1 = update(&a0, &a0.metadata_location, 1);
    commit(&store, c.id, vec![a1.clone()]).await.unwrap();
    commit(&store, c.id, vec![create(ObjectKind::Table, &x, "x")])
        .await
        .unwrap();
    for stale in [read(&a, Some(&a0.metadata_location)), read(&x, None)] {
        let refused = store.write(write_b(&b1, 2, vec![stale.clone()])).await;
        assert!(
            matches!(refused, Err(StoreError::Conflict)),
            "{stale:?}: {refused:?}"
        );
        assert_eq!(
            pointer(&store, "c", &b).await,
            Some(b1.metadata_location.clone())
        );
    }
    assert_eq!(
        pointer(&store, "c", &a).await,
        Some(a1.metadata_location.clone())
    );
}

/// Many writes at once (the embedded store commits them in groups, PostgreSQL in
/// parallel, or in groups with `group_commit`): the ones that fail (stale
/// compare-and-swaps, a name taken twice) fail alone, with their events, and every other
/// write commits with its own.
async fn concurrent_writes_fail_alone(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let t = ident(&["db"], "t");
    let first = create(ObjectKind::Table, &t, "t");
    let mut create_t = batch(Mutation::CommitObjects {
        catalog: c.id,
        writes: vec![first.clone()],
    });
    create_t.events = events_for(&c, vec![Draft::object(Operation::CreateTable, &t, "t")]);
    store.write(create_t).await.unwrap();
    const EACH: usize = 24;
    let mut tasks = Vec::new();
    for i in 0..EACH {
        // Every one of these swaps from the same version: one wins.
        let swap = update(&first, &first.metadata_location, i as u32 + 1);
        let mut cas = batch(Mutation::CommitObjects {
            catalog: c.id,
            writes: vec![swap],
        });
        cas.events = events_for(&c, vec![Draft::object(Operation::UpdateTable, &t, "t")]);
        // Distinct new tables, plus one name (`dup`) that several try to take.
        let name = if i % 6 == 0 {
            "dup".to_string()
        } else {
            format!("n{i}")
        };
        let new = ident(&["db"], &name);
        let mut make = batch(Mutation::CommitObjects {
            catalog: c.id,
            writes: vec![create(ObjectKind::Table, &new, &format!("{name}_{i}"))],
        });
        make.events = events_for(&c, vec![Draft::object(Operation::CreateTable, &new, &name)]);
        for b in [cas, make] {
            let store = store.clone();
            tasks.push(tokio::spawn(async move { store.write(b).await }));
        }
    }
    let mut won = 0;
    let mut conflicts = 0;
    let mut created = 0;
    let mut taken = 0;
    for (i, task) in tasks.into_iter().enumerate() {
        match (i % 2, task.await.unwrap()) {
            (0, Ok(_)) => won += 1,
            (0, Err(StoreError::Conflict)) => conflicts += 1,
            (1, Ok(_)) => created += 1,
            (1, Err(StoreError::ObjectExists { .. })) => taken += 1,
            (_, other) => panic!("unexpected outcome {other:?}"),
        }
    }
    let dups = EACH.div_ceil(6);
    assert_eq!((won, conflicts), (1, EACH - 1));
    assert_eq!((created, taken), (EACH - dups + 1, dups - 1));
    // Exactly the committed writes have events: the create of t, the winning swap, and
    // one create per new table; positions have no gaps.
    let events = all_events(&store).await;
    let updates = events
        .iter()
        .filter(|e| e.operation == "update-table")
        .count();
    let creates = events
        .iter()
        .filter(|e| e.operation == "create-table")
        .count();
    assert_eq!((updates, creates), (1, 1 + created));
    let positions: Vec<i64> = events.iter().map(|e| e.position).collect();
    assert_eq!(positions, (1..=events.len() as i64).collect::<Vec<_>>());
    assert_eq!(tables_in(&store, "c", &["db"]).await.len(), 1 + created);
}

/// Linearizable loads under concurrent writes (what the embedded store's cache must keep):
/// a load that starts after a commit was acknowledged sees that commit or a later one;
/// loads never go back in time; a dropped or renamed object is gone for the next load.
async fn loads_see_every_acknowledged_write(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let t = ident(&["db"], "t");
    let first = create(ObjectKind::Table, &t, "t");
    commit(&store, c.id, vec![first.clone()]).await.unwrap();
    const VERSIONS: u32 = 40;
    // The last acknowledged version, published by the writer after each ack.
    let acked = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let version_of = |location: &str| -> u32 {
        let file = location.rsplit('/').next().unwrap();
        file.trim_end_matches(".json").parse().unwrap()
    };
    let mut readers = Vec::new();
    for _ in 0..4 {
        let (store, acked, t) = (store.clone(), acked.clone(), t.clone());
        readers.push(tokio::spawn(async move {
            let mut last_seen = 0;
            loop {
                let floor = acked.load(std::sync::atomic::Ordering::SeqCst);
                let location = pointer(&store, "c", &t).await.unwrap();
                let seen = version_of(&location);
                assert!(
                    seen >= floor,
                    "load saw v{seen} after v{floor} was acknowledged"
                );
                assert!(
                    seen >= last_seen,
                    "load went back from v{last_seen} to v{seen}"
                );
                last_seen = seen;
                if floor == VERSIONS {
                    return;
                }
                tokio::task::yield_now().await;
            }
        }));
    }
    let mut previous = first.clone();
    for version in 1..=VERSIONS {
        let next = update(&first, &previous.metadata_location, version);
        commit(&store, c.id, vec![next.clone()]).await.unwrap();
        acked.store(version, std::sync::atomic::Ordering::SeqCst);
        previous = next;
    }
    for reader in readers {
        reader.await.unwrap();
    }
    // A rename and a drop are seen by the next load, even of a pointer loaded just before.
    let moved = ident(&["db"], "moved");
    assert!(pointer(&store, "c", &t).await.is_some());
    store
        .write(batch(Mutation::RenameObject {
            catalog: c.id,
            kind: ObjectKind::Table,
            from: t.clone(),
            to: moved.clone(),
            expected: previous.metadata_location.clone(),
        }))
        .await
        .unwrap();
    assert_eq!(pointer(&store, "c", &t).await, None);
    assert_eq!(
        pointer(&store, "c", &moved).await,
        Some(previous.metadata_location.clone())
    );
    store
        .write(batch(Mutation::DropObject {
            catalog: c.id,
            kind: ObjectKind::Table,
            ident: moved.clone(),
            expected: previous.metadata_location.clone(),
            retain: None,
        }))
        .await
        .unwrap();
    assert_eq!(pointer(&store, "c", &moved).await, None);
}

/// A load returns the document of the pointer it returns, whatever was loaded before
/// (both stores keep loaded documents in memory): after a commit, after a commit that
/// keeps the location but changes the document, after a rename onto a name loaded before
/// and after a drop and re-create under one name.
async fn loads_return_the_current_document(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let t = ident(&["db"], "t");
    let document = |store: Arc<dyn Store>, ident: Ident| async move {
        store
            .load_object("c", &ident)
            .await
            .unwrap()
            .map(|o| (o.metadata_location, o.metadata.into_string()))
    };
    let first = create(ObjectKind::Table, &t, "t");
    commit(&store, c.id, vec![first.clone()]).await.unwrap();
    let loaded = document(store.clone(), t.clone()).await;
    assert_eq!(
        loaded,
        Some((first.metadata_location.clone(), first.metadata.clone()))
    );
    // Loaded twice: the second may come from memory, and must be the same.
    assert_eq!(document(store.clone(), t.clone()).await, loaded);

    let second = update(&first, &first.metadata_location, 1);
    commit(&store, c.id, vec![second.clone()]).await.unwrap();
    assert_eq!(
        document(store.clone(), t.clone()).await,
        Some((second.metadata_location.clone(), second.metadata.clone()))
    );

    // The same location with another document (not something Floe's catalog does, but
    // the store must not answer from a copy keyed by location alone).
    let rewritten = ObjectWrite {
        expected_metadata_location: Some(second.metadata_location.clone()),
        metadata: "{\"v\":1,\"rewritten\":true}".into(),
        ..second.clone()
    };
    commit(&store, c.id, vec![rewritten.clone()]).await.unwrap();
    assert_eq!(
        document(store.clone(), t.clone()).await,
        Some((
            rewritten.metadata_location.clone(),
            rewritten.metadata.clone()
        ))
    );

    // Another table loaded under a name, then renamed away, and this one renamed onto it.
    let u = ident(&["db"], "u");
    let other = create(ObjectKind::Table, &u, "u");
    commit(&store, c.id, vec![other.clone()]).await.unwrap();
    assert!(document(store.clone(), u.clone()).await.is_some());
    store
        .write(batch(Mutation::DropObject {
            catalog: c.id,
            kind: ObjectKind::Table,
            ident: u.clone(),
            expected: other.metadata_location.clone(),
            retain: None,
        }))
        .await
        .unwrap();
    assert_eq!(document(store.clone(), u.clone()).await, None);
    store
        .write(batch(Mutation::RenameObject {
            catalog: c.id,
            kind: ObjectKind::Table,
            from: t.clone(),
            to: u.clone(),
            expected: rewritten.metadata_location.clone(),
        }))
        .await
        .unwrap();
    assert_eq!(
        document(store.clone(), u.clone()).await,
        Some((
            rewritten.metadata_location.clone(),
            rewritten.metadata.clone()
        ))
    );
    assert_eq!(document(store.clone(), t.clone()).await, None);

    // Re-created under the old name with its very first location and another document.
    let again = ObjectWrite {
        metadata: "{\"v\":0,\"again\":true}".into(),
        location: format!("{WAREHOUSE}t2/"),
        metadata_location: first.metadata_location.clone(),
        ..first.clone()
    };
    commit(&store, c.id, vec![again.clone()]).await.unwrap();
    assert_eq!(
        document(store.clone(), t.clone()).await,
        Some((again.metadata_location.clone(), again.metadata.clone()))
    );
}

// ---------------------------------------------------------------------------------
// PostgreSQL only
// ---------------------------------------------------------------------------------

/// The connection that reads share (`--db-read-connections`) is closed under them, as a
/// database restart or an administrator would: the next reads still answer (one of them
/// finds the connection closed and reads again on a fresh one), and nothing is lost.
#[tokio::test]
async fn postgres_reads_survive_their_shared_connection_closing() {
    let Some(settings) = crate::common::postgres_for_test().await else {
        eprintln!("FLOE_TEST_DATABASE_URL not set: PostgreSQL not tested");
        return;
    };
    let app = format!("floe_readers_{}", uuid::Uuid::new_v4().simple());
    let settings = floe::store::postgres::PostgresSettings {
        url: format!("{}&application_name={app}", settings.url),
        read_connections: 1,
        ..settings
    };
    let store: Arc<dyn Store> = Arc::new(PostgresStore::open(&settings).await.unwrap());
    let c = catalog_with_db(&store, "c").await;
    let t = ident(&["db"], "t");
    let first = create(ObjectKind::Table, &t, &format!("{WAREHOUSE}t/"));
    commit(&store, c.id, vec![first.clone()]).await.unwrap();
    assert_eq!(
        pointer(&store, "c", &t).await,
        Some(first.metadata_location.clone())
    );

    let (admin, connection) = tokio_postgres::connect(
        &std::env::var("FLOE_TEST_DATABASE_URL").unwrap(),
        tokio_postgres::NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    for round in 0..3 {
        let killed = admin
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                &[&app],
            )
            .await
            .unwrap();
        assert!(
            !killed.is_empty(),
            "round {round}: the store's connections were found"
        );
        // Concurrent reads, as a loaded node sends them, all land on the closed connection.
        let reads = (0..8).map(|_| pointer(&store, "c", &t));
        for read in futures_util::future::join_all(reads).await {
            assert_eq!(read, Some(first.metadata_location.clone()), "round {round}");
        }
    }
    assert_eq!(tables_in(&store, "c", &["db"]).await, vec!["t".to_string()]);
}

/// Where a store takes batches in order (`Store::enqueue`: the embedded store, and
/// PostgreSQL with group commit), a commit enqueued on top of one still in flight lands
/// after it: a chain of commits to one table, each enqueued before the one it builds on
/// is durable, all succeed. (On PostgreSQL the chain spans groups in flight at once; a
/// later one must not reach the row before an earlier one has committed.)
async fn enqueued_commits_build_on_each_other(store: Arc<dyn Store>) {
    let c = catalog_with_db(&store, "c").await;
    let t = ident(&["db"], "t");
    let first = create(ObjectKind::Table, &t, "t");
    commit(&store, c.id, vec![first.clone()]).await.unwrap();
    let mut previous = first;
    let mut tickets = Vec::new();
    let mut sent = Vec::new();
    for version in 1..=48 {
        let next = update(&previous, &previous.metadata_location, version);
        sent.push(next.clone());
        let mutation = Mutation::CommitObjects {
            catalog: c.id,
            writes: vec![next.clone()],
        };
        match store.enqueue(batch(mutation)) {
            Ok(ticket) => tickets.push(ticket),
            // This store does not take batches in order: nothing to check.
            Err(_) => return,
        }
        previous = next;
        if version % 6 == 1 {
            // Let a group start with what is queued, so the chain spans many groups.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
    for (i, (ticket, write)) in tickets.into_iter().zip(sent).enumerate() {
        match ticket.await {
            Ok(applied) => assert_eq!(applied, Applied::Committed(vec![write])),
            Err(e) => panic!("commit {} of the chain failed: {e:?}", i + 1),
        }
    }
    assert_eq!(
        pointer(&store, "c", &t).await.as_deref(),
        Some(previous.metadata_location.as_str())
    );
}

/// A list returns every membership change acknowledged before it began (the embedded
/// store keeps list pages in memory): creates seen by concurrent listers, then each
/// other kind of change after the lists it changes were just read (and so may be kept):
/// a namespace created, a rename across namespaces, a commit that changes no list, a
/// drop kept for undrop and the undrop, a view, a namespace dropped, a catalog created.
async fn lists_see_every_acknowledged_membership_change(store: Arc<dyn Store>) {
    use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
    let c = catalog_with_db(&store, "c").await;
    let name = |i: u32| format!("t{i:02}");
    const TABLES: u32 = 30;
    let acked = Arc::new(AtomicU32::new(0));
    let mut listers = Vec::new();
    for lister in 0..4 {
        let (store, acked) = (store.clone(), acked.clone());
        listers.push(tokio::spawn(async move {
            loop {
                let floor = acked.load(SeqCst);
                // Half the listers read a one-name page, the others the whole list.
                let limit = (lister % 2 == 0).then_some(1);
                let page = store
                    .list_objects(
                        "c",
                        &ns(&["db"]),
                        ObjectKind::Table,
                        &PageRequest { after: None, limit },
                    )
                    .await
                    .unwrap();
                if limit.is_some() {
                    // Later creates may already be visible, never fewer than acknowledged.
                    if floor >= 1 {
                        assert_eq!(page.items, vec![name(0)]);
                    }
                    assert!(
                        floor < 2 || page.next_after.is_some(),
                        "{floor} acknowledged"
                    );
                } else {
                    let expected: Vec<String> = (0..floor).map(name).collect();
                    assert!(
                        page.items.len() >= floor as usize
                            && page.items[..floor as usize] == expected,
                        "list {:?} after {floor} creates were acknowledged",
                        page.items
                    );
                }
                if floor == TABLES {
                    return;
                }
                tokio::task::yield_now().await;
            }
        }));
    }
    let mut writes = Vec::new();
    for i in 0..TABLES {
        let write = create(ObjectKind::Table, &ident(&["db"], &name(i)), &name(i));
        commit(&store, c.id, vec![write.clone()]).await.unwrap();
        writes.push(write);
        acked.store(i + 1, SeqCst);
    }
    for lister in listers {
        lister.await.unwrap();
    }
    let all: Vec<String> = (0..TABLES).map(name).collect();
    let namespaces = |store: Arc<dyn Store>| async move {
        store
            .list_namespaces("c", &Namespace::root(), &PageRequest::default())
            .await
            .unwrap()
            .items
    };
    assert_eq!(namespaces(store.clone()).await, vec![ns(&["db"])]);
    create_namespace(&store, c.id, &["db2"]).await.unwrap();
    assert_eq!(
        namespaces(store.clone()).await,
        vec![ns(&["db"]), ns(&["db2"])]
    );
    // A rename across namespaces leaves one list and joins the other.
    assert_eq!(tables_in(&store, "c", &["db2"]).await, Vec::<String>::new());
    assert_eq!(tables_in(&store, "c", &["db"]).await, all);
    store
        .write(batch(Mutation::RenameObject {
            catalog: c.id,
            kind: ObjectKind::Table,
            from: ident(&["db"], &name(0)),
            to: ident(&["db2"], "moved"),
            expected: writes[0].metadata_location.clone(),
        }))
        .await
        .unwrap();
    assert_eq!(tables_in(&store, "c", &["db"]).await, all[1..]);
    assert_eq!(tables_in(&store, "c", &["db2"]).await, vec!["moved"]);
    // A commit to an existing table changes no list.
    let next = update(&writes[1], &writes[1].metadata_location, 1);
    commit(&store, c.id, vec![next.clone()]).await.unwrap();
    assert_eq!(tables_in(&store, "c", &["db"]).await, all[1..]);
    // Dropped (kept for undrop), then back.
    store
        .write(batch(Mutation::DropObject {
            catalog: c.id,
            kind: ObjectKind::Table,
            ident: ident(&["db"], &name(1)),
            expected: next.metadata_location.clone(),
            retain: Some(Retention {
                id: "d1".into(),
                purge: false,
                dropped_ms: now_ms(),
                expires_ms: now_ms() + 60_000,
            }),
        }))
        .await
        .unwrap();
    assert_eq!(tables_in(&store, "c", &["db"]).await, all[2..]);
    store
        .write(batch(Mutation::Undrop {
            catalog: c.id,
            id: "d1".into(),
            write: ObjectWrite {
                expected_metadata_location: None,
                ..next.clone()
            },
        }))
        .await
        .unwrap();
    assert_eq!(tables_in(&store, "c", &["db"]).await, all[1..]);
    // A view joins the views' list, not the tables'.
    let views = || objects_in(&store, "c", &["db"], ObjectKind::View);
    assert_eq!(views().await, Vec::<String>::new());
    commit(
        &store,
        c.id,
        vec![create(ObjectKind::View, &ident(&["db"], "v"), "v")],
    )
    .await
    .unwrap();
    assert_eq!(views().await, vec!["v"]);
    assert_eq!(tables_in(&store, "c", &["db"]).await, all[1..]);
    // An emptied namespace dropped: gone from its parent's list, and its own list fails.
    store
        .write(batch(Mutation::DropObject {
            catalog: c.id,
            kind: ObjectKind::Table,
            ident: ident(&["db2"], "moved"),
            expected: writes[0].metadata_location.clone(),
            retain: None,
        }))
        .await
        .unwrap();
    assert_eq!(tables_in(&store, "c", &["db2"]).await, Vec::<String>::new());
    store
        .write(batch(Mutation::DropNamespace {
            catalog: c.id,
            namespace: ns(&["db2"]),
        }))
        .await
        .unwrap();
    assert_eq!(namespaces(store.clone()).await, vec![ns(&["db"])]);
    assert!(matches!(
        store
            .list_objects(
                "c",
                &ns(&["db2"]),
                ObjectKind::Table,
                &PageRequest::default()
            )
            .await,
        Err(StoreError::NamespaceMissing(_))
    ));
    // A catalog that did not exist when listed is listed once created.
    assert!(matches!(
        store
            .list_namespaces("c2", &Namespace::root(), &PageRequest::default())
            .await,
        Err(StoreError::CatalogMissing(_))
    ));
    catalog_with_db(&store, "c2").await;
    assert_eq!(
        store
            .list_namespaces("c2", &Namespace::root(), &PageRequest::default())
            .await
            .unwrap()
            .items,
        vec![ns(&["db"])]
    );
}
