//! Server-side scan planning over HTTP: `…/plan`, `…/plan/{plan-id}` and `…/tasks`.
//!
//! Each test writes a table's manifests itself with iceberg-rust's writers (the data
//! files need not exist: planning reads manifests only) and commits the snapshot through
//! the REST API, so the expected plan is known file by file. Runs on every store and on
//! S3 like the other HTTP suites (the manifests go where the table's files go).

use std::collections::BTreeSet;

use crate::common::*;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, Literal, ManifestFile,
    ManifestListWriter, ManifestWriterBuilder, Struct, TableMetadata,
};
use serde_json::{json, Value};

const NS: &[&str] = &["db"];

/// A partitioned (identity on `data`) format-2 table; returns its metadata.
async fn partitioned_table(s: &Server, name: &str) -> TableMetadata {
    s.create_table_with(
        NS,
        json!({
            "name": name,
            "schema": schema(),
            "partition-spec": { "spec-id": 0, "fields": [
                { "name": "data", "transform": "identity", "source-id": 2, "field-id": 1000 }
            ]},
            "properties": { "format-version": "2" },
        }),
    )
    .await
    .ok(200);
    metadata(s, name).await
}

async fn metadata(s: &Server, name: &str) -> TableMetadata {
    serde_json::from_value(s.load_table(NS, name).await["metadata"].clone()).unwrap()
}

fn data_file(path: &str, partition: &str, ids: (i64, i64)) -> DataFile {
    DataFileBuilder::default()
        .content(DataContentType::Data)
        .file_path(path.to_owned())
        .file_format(DataFileFormat::Parquet)
        .partition(Struct::from_iter([Some(Literal::string(partition))]))
        .record_count(10)
        .file_size_in_bytes(1000)
        .lower_bounds([(1, Datum::long(ids.0)), (2, Datum::string(partition))].into())
        .upper_bounds([(1, Datum::long(ids.1)), (2, Datum::string(partition))].into())
        .value_counts([(1, 10)].into())
        .build()
        .unwrap()
}

fn position_deletes(path: &str, partition: &str) -> DataFile {
    DataFileBuilder::default()
        .content(DataContentType::PositionDeletes)
        .file_path(path.to_owned())
        .file_format(DataFileFormat::Parquet)
        .partition(Struct::from_iter([Some(Literal::string(partition))]))
        .record_count(2)
        .file_size_in_bytes(300)
        .build()
        .unwrap()
}

/// Writes a manifest (in memory, then where the table's files go) and returns its entry
/// for the manifest list.
async fn manifest(
    s: &Server,
    table: &TableMetadata,
    location: String,
    files: Vec<DataFile>,
    deletes: bool,
) -> ManifestFile {
    let memory = FileIO::new_with_memory();
    let scratch = format!("memory:///{}", uuid::Uuid::new_v4());
    let builder = ManifestWriterBuilder::new(
        memory.new_output(&scratch).unwrap(),
        Some(1),
        table.current_schema().clone(),
        table.default_partition_spec().as_ref().clone(),
    );
    let mut writer = if deletes {
        builder.build_v2_deletes()
    } else {
        builder.build_v2_data()
    };
    for file in files {
        writer.add_file(file, 1).unwrap();
    }
    let mut entry = writer.write_manifest_file().await.unwrap();
    let bytes = memory.new_input(&scratch).unwrap().read().await.unwrap();
    s.files.write(&location, bytes.to_vec()).await;
    entry.manifest_path = location;
    entry
}

/// Writes the manifest list and commits it as the table's snapshot 1.
async fn commit_snapshot(s: &Server, name: &str, list: String, manifests: Vec<ManifestFile>) {
    let memory = FileIO::new_with_memory();
    let scratch = format!("memory:///{}", uuid::Uuid::new_v4());
    let out = memory.new_output(&scratch).unwrap();
    let mut writer = ManifestListWriter::v2(out.writer().await.unwrap(), 1, None, 1);
    writer.add_manifests(manifests.into_iter()).unwrap();
    writer.close().await.unwrap();
    let bytes = memory.new_input(&scratch).unwrap().read().await.unwrap();
    s.files.write(&list, bytes.to_vec()).await;
    commit_snapshot_pointing_at(s, name, &list).await;
}

fn plan_url(name: &str) -> String {
    format!("{}/plan", table_url(NS, name))
}

fn paths(result: &Value) -> Vec<String> {
    result["file-scan-tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["data-file"]["file-path"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn plans_prune_by_partition_and_metrics_and_carry_their_deletes() {
    let s = Server::start().await;
    s.create_namespace(NS).await;
    let table = partitioned_table(&s, "t").await;
    let at = |f: &str| format!("{}/{f}", table.location());
    let data = manifest(
        &s,
        &table,
        at("metadata/m-data.avro"),
        vec![
            data_file(&at("data/a.parquet"), "a", (1, 10)),
            data_file(&at("data/b.parquet"), "b", (11, 20)),
            data_file(&at("data/c.parquet"), "c", (21, 30)),
        ],
        false,
    )
    .await;
    let deletes = manifest(
        &s,
        &table,
        at("metadata/m-deletes.avro"),
        vec![position_deletes(&at("data/a-deletes.parquet"), "a")],
        true,
    )
    .await;
    commit_snapshot(&s, "t", at("metadata/snap-1.avro"), vec![data, deletes]).await;

    // The whole table: three files, sorted by path; a.parquet with its delete file.
    let all = s.post(&plan_url("t"), &json!({})).await.ok(200).json();
    assert_eq!(all["status"], "completed", "{all}");
    assert!(
        all["plan-id"].as_str().unwrap().starts_with("sync-"),
        "{all}"
    );
    assert_eq!(
        paths(&all),
        [
            at("data/a.parquet"),
            at("data/b.parquet"),
            at("data/c.parquet")
        ]
    );
    assert!(all.get("plan-tasks").is_none(), "{all}");
    let a = &all["file-scan-tasks"][0];
    assert_eq!(a["delete-file-references"], json!([0]), "{all}");
    assert!(all["file-scan-tasks"][1]
        .get("delete-file-references")
        .is_none());
    let delete = &all["delete-files"][0];
    assert_eq!(delete["content"], "position-deletes");
    assert_eq!(delete["file-path"], at("data/a-deletes.parquet"));
    assert_eq!(delete["record-count"], 2);
    assert_eq!(delete["partition"], json!(["a"]));
    let file = &a["data-file"];
    assert_eq!(file["content"], "data");
    assert_eq!(file["file-format"], "parquet");
    assert_eq!(file["spec-id"], 0);
    assert_eq!(file["partition"], json!(["a"]));
    assert_eq!(file["record-count"], 10);
    assert_eq!(file["file-size-in-bytes"], 1000);
    assert!(
        file.get("lower-bounds").is_none(),
        "stats only when asked: {file}"
    );

    // A partition filter, then a metrics filter, then both with `or` (c.parquet goes
    // only because its `data` bounds say it holds no "a").
    let only_b = json!({ "filter": { "type": "eq", "term": "data", "value": "b" } });
    let b = s.post(&plan_url("t"), &only_b).await.ok(200).json();
    assert_eq!(paths(&b), [at("data/b.parquet")]);
    // No residual without a filter, nor where the file's identity partition value decides
    // it; otherwise what is left of the filter.
    assert!(
        b["file-scan-tasks"][0].get("residual-filter").is_none(),
        "{b}"
    );
    assert!(all["file-scan-tasks"][0].get("residual-filter").is_none());
    assert_eq!(b["delete-files"], json!([]));
    let high = json!({ "filter": { "type": "gt", "term": "id", "value": 25 } });
    assert_eq!(
        paths(&s.post(&plan_url("t"), &high).await.ok(200).json()),
        [at("data/c.parquet")]
    );
    let either = json!({ "filter": { "type": "or",
        "left": { "type": "eq", "term": "data", "value": "a" },
        "right": { "type": "lt-eq", "term": "id", "value": 11 } } });
    let planned = s.post(&plan_url("t"), &either).await.ok(200).json();
    assert_eq!(
        paths(&planned),
        [at("data/a.parquet"), at("data/b.parquet")]
    );
    // a.parquet matches throughout (data = "a"); b.parquet's rows still need `id <= 11`.
    let tasks = &planned["file-scan-tasks"];
    assert!(tasks[0].get("residual-filter").is_none(), "{planned}");
    assert_eq!(tasks[1]["residual-filter"], either["filter"]["right"]);
    let case = json!({ "filter": { "type": "eq", "term": "DATA", "value": "c" },
        "case-sensitive": false, "snapshot-id": 1 });
    assert_eq!(
        paths(&s.post(&plan_url("t"), &case).await.ok(200).json()),
        [at("data/c.parquet")]
    );
    // Java's client writes `alwaysTrue()` and `alwaysFalse()` as bare booleans, at the
    // top (an unfiltered scan) or inside an expression.
    let java_true = s
        .post(&plan_url("t"), &json!({ "filter": true }))
        .await
        .ok(200)
        .json();
    assert_eq!(paths(&java_true), paths(&all));
    assert!(java_true["file-scan-tasks"][0]
        .get("residual-filter")
        .is_none());
    let java_false = json!({ "filter": false });
    assert!(paths(&s.post(&plan_url("t"), &java_false).await.ok(200).json()).is_empty());
    let b_or_false =
        json!({ "filter": { "type": "or", "left": only_b["filter"], "right": false } });
    assert_eq!(
        paths(&s.post(&plan_url("t"), &b_or_false).await.ok(200).json()),
        [at("data/b.parquet")]
    );

    // Transform terms the table is not partitioned by are checked but prune nothing
    // (`bucket` has no column range), `not` or no `not`; the residual keeps them for the
    // client.
    let bucket = json!({ "type": "eq", "value": 1,
        "term": { "type": "transform", "transform": "bucket[4]", "term": "id" } });
    let with_bucket =
        json!({ "filter": { "type": "and", "left": only_b["filter"], "right": bucket } });
    let planned = s.post(&plan_url("t"), &with_bucket).await.ok(200).json();
    assert_eq!(paths(&planned), [at("data/b.parquet")]);
    assert_eq!(planned["file-scan-tasks"][0]["residual-filter"], bucket);
    let not_bucket = json!({ "filter": { "type": "not", "child": bucket } });
    assert_eq!(
        paths(&s.post(&plan_url("t"), &not_bucket).await.ok(200).json()).len(),
        3
    );
    let bad_bucket = json!({ "filter": { "type": "eq", "value": "x",
        "term": { "type": "transform", "transform": "bucket[4]", "term": "id" } } });
    let message = s
        .post(&plan_url("t"), &bad_bucket)
        .await
        .error(400, "BadRequestException");
    assert!(message.contains("transform term"), "{message}");

    // Statistics for the fields asked for.
    let stats = json!({ "stats-fields": ["id"], "filter": only_b["filter"] });
    let b = s.post(&plan_url("t"), &stats).await.ok(200).json();
    let file = &b["file-scan-tasks"][0]["data-file"];
    assert_eq!(
        file["lower-bounds"],
        json!({ "keys": [1], "values": [11] }),
        "{file}"
    );
    assert_eq!(
        file["upper-bounds"],
        json!({ "keys": [1], "values": [20] }),
        "{file}"
    );
    assert_eq!(
        file["value-counts"],
        json!({ "keys": [1], "values": [10] }),
        "{file}"
    );

    // Plan ids: nothing is kept, so nothing to fetch; cancelling ours is fine.
    let plan_id = all["plan-id"].as_str().unwrap();
    let one = format!("{}/{plan_id}", plan_url("t"));
    s.get(&one).await.error(404, "NoSuchPlanIdException");
    s.delete(&one).await.ok(204);
    let other = format!("{}/not-ours", plan_url("t"));
    s.delete(&other).await.error(404, "NoSuchPlanIdException");
    s.get(&other).await.error(404, "NoSuchPlanIdException");
}

/// A position delete file of one data file (`referenced_data_file`, or a deletion vector).
fn deletes_of(path: &str, partition: &str, data_file: &str, format: DataFileFormat) -> DataFile {
    let vector = format == DataFileFormat::Puffin;
    DataFileBuilder::default()
        .content(DataContentType::PositionDeletes)
        .file_path(path.to_owned())
        .file_format(format)
        .partition(Struct::from_iter([Some(Literal::string(partition))]))
        .record_count(2)
        .file_size_in_bytes(300)
        .referenced_data_file(Some(data_file.to_owned()))
        .content_offset(vector.then_some(4))
        .content_size_in_bytes(vector.then_some(40))
        .build()
        .unwrap()
}

/// The paths of the delete files each task of an answer references, by data file path.
fn deletes_by_task(answer: &Value) -> Vec<(String, BTreeSet<String>)> {
    let files = answer["delete-files"].as_array().unwrap();
    let tasks = answer["file-scan-tasks"].as_array().unwrap();
    (tasks.iter())
        .map(|task| {
            let path = task["data-file"]["file-path"].as_str().unwrap().to_owned();
            let references = task.get("delete-file-references").map(|r| {
                let r = r.as_array().unwrap();
                assert!(!r.is_empty(), "references, when there, name files: {task}");
                r.iter()
                    .map(|i| files[i.as_u64().unwrap() as usize]["file-path"].clone())
                    .map(|p| p.as_str().unwrap().to_owned())
                    .collect::<BTreeSet<String>>()
            });
            (path, references.unwrap_or_default())
        })
        .collect()
}

/// iceberg-rust matches position deletes to data files by partition and sequence number
/// only: a position delete file or deletion vector that names its data file
/// (`referenced_data_file`) must still reach that file alone, and where a deletion vector
/// applies, the partition's position delete files do not (the vector holds them). A
/// format-2 table like the others here: planning does not look at the format version,
/// and format-2 manifests carry these fields.
#[tokio::test]
async fn deletes_that_name_their_data_file_reach_it_alone() {
    let s = Server::start().await;
    s.create_namespace(NS).await;
    let table = partitioned_table(&s, "named").await;
    let at = |f: &str| format!("{}/{f}", table.location());
    let data = manifest(
        &s,
        &table,
        at("metadata/m-data.avro"),
        vec![
            data_file(&at("data/a.parquet"), "p", (1, 10)),
            data_file(&at("data/b.parquet"), "p", (11, 20)),
            data_file(&at("data/c.parquet"), "p", (21, 30)),
        ],
        false,
    )
    .await;
    let (of_a, of_p, dv_of_c) = (
        at("data/a-deletes.parquet"),
        at("data/p-deletes.parquet"),
        at("data/c-dv.puffin"),
    );
    let deletes = manifest(
        &s,
        &table,
        at("metadata/m-deletes.avro"),
        vec![
            deletes_of(&of_a, "p", &at("data/a.parquet"), DataFileFormat::Parquet),
            position_deletes(&of_p, "p"),
            deletes_of(&dv_of_c, "p", &at("data/c.parquet"), DataFileFormat::Puffin),
        ],
        true,
    )
    .await;
    commit_snapshot(&s, "named", at("metadata/snap-1.avro"), vec![data, deletes]).await;

    let set = |paths: Vec<&String>| -> BTreeSet<String> { paths.into_iter().cloned().collect() };
    // a.parquet: its own file and the partition's; b.parquet: the partition's only;
    // c.parquet: its deletion vector only, which replaces the partition's file.
    let all = s.post(&plan_url("named"), &json!({})).await.ok(200).json();
    assert_eq!(
        deletes_by_task(&all),
        [
            (at("data/a.parquet"), set(vec![&of_a, &of_p])),
            (at("data/b.parquet"), set(vec![&of_p])),
            (at("data/c.parquet"), set(vec![&dv_of_c])),
        ],
        "{all}"
    );
    let dv = (all["delete-files"].as_array().unwrap().iter())
        .find(|f| f["file-path"] == dv_of_c.as_str())
        .unwrap();
    assert_eq!(dv["file-format"], "puffin", "{dv}");
    assert_eq!(dv["referenced-data-file"], at("data/c.parquet"), "{dv}");
    assert_eq!(dv["content-offset"], 4, "{dv}");

    // An answer without a.parquet lists neither its deletes.
    let later = json!({ "filter": { "type": "gt", "term": "id", "value": 10 } });
    let answer = s.post(&plan_url("named"), &later).await.ok(200).json();
    assert_eq!(
        deletes_by_task(&answer),
        [
            (at("data/b.parquet"), set(vec![&of_p])),
            (at("data/c.parquet"), set(vec![&dv_of_c])),
        ],
        "{answer}"
    );
    assert_eq!(
        answer["delete-files"].as_array().unwrap().len(),
        2,
        "{answer}"
    );
}

/// `id` was an int, then promoted to a long. A manifest written before holds int bounds,
/// which iceberg-rust cannot compare with a long literal: a filter on `id` must keep its
/// files rather than prune them (the residual leaves the rows to the client), while the
/// other columns still prune. Then the schema changes with no new snapshot: a request's
/// names are the current schema's (`use-snapshot-schema` false, the default), so a
/// renamed column is found under its new name and still prunes, and an added one can be
/// selected and filtered on (pruning nothing).
#[tokio::test]
async fn filters_on_a_promoted_column_keep_the_files_written_before() {
    let s = Server::start().await;
    s.create_namespace(NS).await;
    let fields = |id_type: &str| {
        json!([
            { "id": 1, "name": "id", "required": true, "type": id_type },
            { "id": 2, "name": "data", "required": false, "type": "string" }
        ])
    };
    s.create_table_with(
        NS,
        json!({
            "name": "promoted",
            "schema": { "type": "struct", "schema-id": 0, "fields": fields("int") },
            "partition-spec": { "spec-id": 0, "fields": [
                { "name": "data", "transform": "identity", "source-id": 2, "field-id": 1000 }
            ]},
            "properties": { "format-version": "2" },
        }),
    )
    .await
    .ok(200);
    let before = metadata(&s, "promoted").await;
    let at = |f: &str| format!("{}/{f}", before.location());
    // Written under the int schema: its bounds are ints, 1 to 10.
    let old_file = DataFileBuilder::default()
        .content(DataContentType::Data)
        .file_path(at("data/old.parquet"))
        .file_format(DataFileFormat::Parquet)
        .partition(Struct::from_iter([Some(Literal::string("a"))]))
        .record_count(10)
        .file_size_in_bytes(1000)
        .lower_bounds([(1, Datum::int(1))].into())
        .upper_bounds([(1, Datum::int(10))].into())
        .value_counts([(1, 10)].into())
        .build()
        .unwrap();
    let old = manifest(
        &s,
        &before,
        at("metadata/m-old.avro"),
        vec![old_file],
        false,
    )
    .await;
    s.commit(
        NS,
        "promoted",
        json!({ "updates": [
            { "action": "add-schema",
              "schema": { "type": "struct", "schema-id": 1, "fields": fields("long") } },
            { "action": "set-current-schema", "schema-id": -1 },
        ]}),
    )
    .await
    .ok(200);
    let after = metadata(&s, "promoted").await;
    assert_eq!(after.current_schema_id(), 1);
    let new = manifest(
        &s,
        &after,
        at("metadata/m-new.avro"),
        vec![data_file(&at("data/new.parquet"), "b", (100, 200))],
        false,
    )
    .await;
    // The snapshot is written with the long schema, which the filter is bound to.
    commit_snapshot(&s, "promoted", at("metadata/snap-1.avro"), vec![old, new]).await;

    let plan = |filter: Value| {
        let s = &s;
        async move {
            s.post(&plan_url("promoted"), &json!({ "filter": filter }))
                .await
                .ok(200)
                .json()
        }
    };
    // old.parquet holds ids up to 10: compared as an int with a long, it was pruned.
    let gt = json!({ "type": "gt", "term": "id", "value": 5 });
    let planned = plan(gt.clone()).await;
    assert_eq!(
        paths(&planned),
        [at("data/new.parquet"), at("data/old.parquet")],
        "{planned}"
    );
    for task in planned["file-scan-tasks"].as_array().unwrap() {
        assert_eq!(task["residual-filter"], gt, "{task}");
    }
    // Not pruned by the promoted column under a `not` either; by the others still.
    let not = json!({ "type": "not", "child": { "type": "eq", "term": "id", "value": 7 } });
    assert_eq!(paths(&plan(not).await).len(), 2);
    let only_b = json!({ "type": "and", "left": gt,
        "right": { "type": "eq", "term": "data", "value": "b" } });
    assert_eq!(paths(&plan(only_b).await), [at("data/new.parquet")]);
    // Its literals are still checked.
    let bad = json!({ "filter": { "type": "gt", "term": "id", "value": "five" } });
    s.post(&plan_url("promoted"), &bad)
        .await
        .error(400, "BadRequestException");

    // `data` renamed to `label`, and `extra` added, without a snapshot since.
    s.commit(
        NS,
        "promoted",
        json!({ "updates": [
            { "action": "add-schema",
              "schema": { "type": "struct", "schema-id": 2, "fields": [
                { "id": 1, "name": "id", "required": true, "type": "long" },
                { "id": 2, "name": "label", "required": false, "type": "string" },
                { "id": 3, "name": "extra", "required": false, "type": "int" }
              ]} },
            { "action": "set-current-schema", "schema-id": -1 },
        ]}),
    )
    .await
    .ok(200);
    let label_b = json!({ "type": "eq", "term": "label", "value": "b" });
    assert_eq!(
        paths(&plan(label_b.clone()).await),
        [at("data/new.parquet")]
    );
    let extra = json!({ "type": "eq", "term": "extra", "value": 1 });
    let planned = s
        .post(
            &plan_url("promoted"),
            &json!({ "filter": extra, "select": ["id", "label", "extra"],
                     "stats-fields": ["extra"] }),
        )
        .await
        .ok(200)
        .json();
    assert_eq!(paths(&planned).len(), 2, "{planned}");
    for task in planned["file-scan-tasks"].as_array().unwrap() {
        assert_eq!(task["residual-filter"], extra, "{task}");
    }
    // In the snapshot's own names, `label` is unknown and `data` is the column.
    let snapshot_names = |filter: Value| json!({ "filter": filter, "use-snapshot-schema": true });
    s.post(&plan_url("promoted"), &snapshot_names(label_b))
        .await
        .error(400, "BadRequestException");
    let data_b = json!({ "type": "eq", "term": "data", "value": "b" });
    let planned = s
        .post(&plan_url("promoted"), &snapshot_names(data_b))
        .await
        .ok(200)
        .json();
    assert_eq!(paths(&planned), [at("data/new.parquet")]);
}

/// A table of (id, data, ts) partitioned by day(ts) and bucket(4, id).
async fn day_and_bucket_table(s: &Server, name: &str) -> TableMetadata {
    s.create_table_with(
        NS,
        json!({
            "name": name,
            "schema": { "type": "struct", "schema-id": 0, "fields": [
                { "id": 1, "name": "id", "required": true, "type": "long" },
                { "id": 2, "name": "data", "required": false, "type": "string" },
                { "id": 3, "name": "ts", "required": false, "type": "timestamp" }
            ]},
            "partition-spec": { "spec-id": 0, "fields": [
                { "name": "ts_day", "transform": "day", "source-id": 3, "field-id": 1000 },
                { "name": "id_bucket", "transform": "bucket[4]", "source-id": 1, "field-id": 1001 }
            ]},
            "properties": { "format-version": "2" },
        }),
    )
    .await
    .ok(200);
    metadata(s, name).await
}

/// A data file of the day-and-bucket table (no column bounds: only partitions prune).
fn day_bucket_file(path: &str, day: i32, bucket: i32) -> DataFile {
    DataFileBuilder::default()
        .content(DataContentType::Data)
        .file_path(path.to_owned())
        .file_format(DataFileFormat::Parquet)
        .partition(Struct::from_iter([
            Some(Literal::date(day)),
            Some(Literal::int(bucket)),
        ]))
        .record_count(10)
        .file_size_in_bytes(1000)
        .build()
        .unwrap()
}

#[tokio::test]
async fn transform_terms_and_other_transforms_prune_and_narrow() {
    let s = Server::start().await;
    s.create_namespace(NS).await;
    let table = day_and_bucket_table(&s, "events").await;
    let at = |f: &str| format!("{}/{f}", table.location());
    // 2024-01-30 is day 19,752. The first day's manifest is listed but never written:
    // a plan that reads it fails, so a plan that succeeds has pruned it by its summary.
    let (d30, d31, f01) = (19_752, 19_753, 19_754);
    let mut early = manifest(
        &s,
        &table,
        at("metadata/m-30.avro"),
        vec![day_bucket_file(&at("data/30-b0.parquet"), d30, 0)],
        false,
    )
    .await;
    early.manifest_path = at("metadata/never-written.avro");
    let later = manifest(
        &s,
        &table,
        at("metadata/m-31.avro"),
        vec![
            day_bucket_file(&at("data/31-b1.parquet"), d31, 1),
            day_bucket_file(&at("data/31-b2.parquet"), d31, 2),
            day_bucket_file(&at("data/01-b1.parquet"), f01, 1),
        ],
        false,
    )
    .await;
    commit_snapshot(&s, "events", at("metadata/snap-1.avro"), vec![early, later]).await;
    let plan = |filter: Value| {
        let s = &s;
        async move {
            s.post(&plan_url("events"), &json!({ "filter": filter }))
                .await
                .ok(200)
                .json()
        }
    };
    let residuals = |planned: &Value| -> Vec<Value> {
        planned["file-scan-tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.get("residual-filter").cloned().unwrap_or(Value::Null))
            .collect()
    };
    let day = |kind: &str, value: &str| {
        json!({ "type": kind, "value": value,
            "term": { "type": "transform", "transform": "day", "term": "ts" } })
    };
    let bucket = json!({ "type": "eq", "value": 1,
        "term": { "type": "transform", "transform": "bucket[4]", "term": "id" } });

    // day(ts) = 2024-01-31: the first day's manifest pruned, the last day's file too; both
    // files left match throughout (their day decides the term).
    let planned = plan(day("eq", "2024-01-31")).await;
    assert_eq!(
        paths(&planned),
        [at("data/31-b1.parquet"), at("data/31-b2.parquet")]
    );
    assert_eq!(residuals(&planned), [Value::Null, Value::Null]);

    // bucket[4](id) = 1 leaves out the files of other buckets (by their partition values).
    let both = json!({ "type": "and", "left": day("gt-eq", "2024-01-31"), "right": bucket });
    let planned = plan(both).await;
    assert_eq!(
        paths(&planned),
        [at("data/01-b1.parquet"), at("data/31-b1.parquet")]
    );
    assert_eq!(residuals(&planned), [Value::Null, Value::Null]);
    let not_bucket = json!({ "type": "and", "left": day("gt-eq", "2024-01-31"),
        "right": { "type": "not", "child": bucket } });
    assert_eq!(paths(&plan(not_bucket).await), [at("data/31-b2.parquet")]);

    // A column's range decided by its day: no residual where the whole day lies inside.
    let ts = |kind: &str, value: &str| json!({ "type": kind, "term": "ts", "value": value });
    let one_day = json!({ "type": "and", "left": ts("gt-eq", "2024-01-31T00:00:00"),
        "right": ts("lt", "2024-02-01T00:00:00") });
    let planned = plan(one_day).await;
    assert_eq!(
        paths(&planned),
        [at("data/31-b1.parquet"), at("data/31-b2.parquet")]
    );
    assert_eq!(residuals(&planned), [Value::Null, Value::Null]);
    // From noon on: the rows of 2024-01-31 must still be checked, not those of 02-01.
    let noon = ts("gt", "2024-01-31T12:00:00");
    let planned = plan(noon.clone()).await;
    assert_eq!(
        paths(&planned),
        [
            at("data/01-b1.parquet"),
            at("data/31-b1.parquet"),
            at("data/31-b2.parquet")
        ]
    );
    assert_eq!(residuals(&planned), [Value::Null, noon.clone(), noon]);

    // A plan that must read the first day's manifest reads it (and fails, here).
    let all = json!({ "filter": day("lt-eq", "2024-01-31") });
    s.post(&plan_url("events"), &all)
        .await
        .error(404, "NotFoundException");
}

/// Writes a manifest of `snapshot` (its added files, and older files kept as EXISTING, as
/// a merge writes them) where the table's files go; returns its manifest list entry.
async fn manifest_of(
    s: &Server,
    table: &TableMetadata,
    name: &str,
    (snapshot, sequence): (i64, i64),
    added: Vec<DataFile>,
    existing: Vec<(DataFile, i64)>,
) -> ManifestFile {
    let memory = FileIO::new_with_memory();
    let scratch = format!("memory:///{}", uuid::Uuid::new_v4());
    let mut writer = ManifestWriterBuilder::new(
        memory.new_output(&scratch).unwrap(),
        Some(snapshot),
        table.current_schema().clone(),
        table.default_partition_spec().as_ref().clone(),
    )
    .build_v2_data();
    for file in added {
        writer.add_file(file, sequence).unwrap();
    }
    for (file, added_by) in existing {
        writer
            .add_existing_file(file, added_by, added_by, Some(added_by))
            .unwrap();
    }
    let mut entry = writer.write_manifest_file().await.unwrap();
    entry.sequence_number = sequence;
    entry.min_sequence_number = sequence;
    let location = format!("{}/metadata/{name}.avro", table.location());
    let bytes = memory.new_input(&scratch).unwrap().read().await.unwrap();
    s.files.write(&location, bytes.to_vec()).await;
    entry.manifest_path = location;
    entry
}

/// Writes snapshot `id`'s manifest list and commits it as the table's current snapshot,
/// child of `id - 1` (snapshot ids are their sequence numbers here).
async fn commit_numbered(
    s: &Server,
    name: &str,
    id: i64,
    operation: &str,
    list: Vec<ManifestFile>,
) {
    let table = metadata(s, name).await;
    let memory = FileIO::new_with_memory();
    let scratch = format!("memory:///{}", uuid::Uuid::new_v4());
    let out = memory.new_output(&scratch).unwrap();
    let parent = (id > 1).then_some(id - 1);
    let mut writer = ManifestListWriter::v2(out.writer().await.unwrap(), id, parent, id);
    writer.add_manifests(list.into_iter()).unwrap();
    writer.close().await.unwrap();
    let location = format!("{}/metadata/snap-{id}.avro", table.location());
    let bytes = memory.new_input(&scratch).unwrap().read().await.unwrap();
    s.files.write(&location, bytes.to_vec()).await;
    let mut snapshot = json!({
        "snapshot-id": id, "sequence-number": id, "timestamp-ms": now_ms(),
        "manifest-list": location, "summary": { "operation": operation }, "schema-id": 0 });
    if let Some(parent) = parent {
        snapshot["parent-snapshot-id"] = parent.into();
    }
    s.commit(
        NS,
        name,
        json!({ "updates": [
            { "action": "add-snapshot", "snapshot": snapshot },
            { "action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": id },
        ]}),
    )
    .await
    .ok(200);
}

#[tokio::test]
async fn incremental_plans_carry_what_the_ranges_appends_added() {
    let s = Server::start().await;
    s.create_namespace(NS).await;
    let table = partitioned_table(&s, "inc").await;
    let at = |f: &str| format!("{}/data/{f}.parquet", table.location());
    let file = |f: &str, part: &str| data_file(&at(f), part, (1, 10));
    // 1 (append): a, b. 2 (append): c. 3 (overwrite): x. 4 (append): d, in a manifest
    // that merged all the others (a, b, c, x kept as EXISTING).
    let m1 = manifest_of(
        &s,
        &table,
        "m1",
        (1, 1),
        vec![file("a", "a"), file("b", "b")],
        vec![],
    )
    .await;
    commit_numbered(&s, "inc", 1, "append", vec![m1.clone()]).await;
    let m2 = manifest_of(&s, &table, "m2", (2, 2), vec![file("c", "c")], vec![]).await;
    commit_numbered(&s, "inc", 2, "append", vec![m2.clone(), m1.clone()]).await;
    let m3 = manifest_of(&s, &table, "m3", (3, 3), vec![file("x", "a")], vec![]).await;
    commit_numbered(&s, "inc", 3, "overwrite", vec![m3, m2, m1]).await;
    let kept = vec![
        (file("a", "a"), 1),
        (file("b", "b"), 1),
        (file("c", "c"), 2),
        (file("x", "a"), 3),
    ];
    let m4 = manifest_of(&s, &table, "m4", (4, 4), vec![file("d", "d")], kept).await;
    commit_numbered(&s, "inc", 4, "append", vec![m4]).await;
    let before = s.load_table(NS, "inc").await;

    let url = plan_url("inc");
    let plan = |body: Value| {
        let (s, url) = (&s, &url);
        async move { paths(&s.post(url, &body).await.ok(200).json()) }
    };
    let range =
        |start: i64, end: i64| json!({ "start-snapshot-id": start, "end-snapshot-id": end });
    assert_eq!(plan(range(1, 4)).await, [at("c"), at("d")]);
    assert_eq!(plan(range(2, 4)).await, [at("d")]);
    assert_eq!(plan(range(1, 2)).await, [at("c")]);
    // The overwrite's file is no append's; nothing between a snapshot and itself.
    assert_eq!(plan(range(2, 3)).await, Vec::<String>::new());
    assert_eq!(plan(range(4, 4)).await, Vec::<String>::new());
    // No start: every append up to the end.
    assert_eq!(
        plan(json!({ "end-snapshot-id": 4 })).await,
        [at("a"), at("b"), at("c"), at("d")]
    );
    assert_eq!(
        plan(json!({ "end-snapshot-id": 1 })).await,
        [at("a"), at("b")]
    );
    // The filter prunes as in a point-in-time plan.
    let mut only = range(1, 4);
    only["filter"] = json!({ "type": "eq", "term": "data", "value": "d" });
    assert_eq!(plan(only.clone()).await, [at("d")]);
    only["filter"] = json!({ "type": "eq", "term": "data", "value": "a" });
    assert_eq!(plan(only).await, Vec::<String>::new());
    // A point-in-time plan of the same snapshot still has every live file.
    assert_eq!(
        plan(json!({ "snapshot-id": 4 })).await,
        [at("a"), at("b"), at("c"), at("d"), at("x")]
    );
    let message = s
        .post(&url, &range(0, 4))
        .await
        .error(400, "BadRequestException");
    assert!(
        message.contains("not an ancestor of end snapshot 4"),
        "{message}"
    );
    let message = s
        .post(&url, &range(4, 2))
        .await
        .error(400, "BadRequestException");
    assert!(message.contains("not an ancestor"), "{message}");
    let message = s
        .post(&url, &range(1, 9))
        .await
        .error(400, "IllegalArgumentException");
    assert!(
        message.contains("Cannot find snapshot with ID 9"),
        "{message}"
    );
    assert_eq!(
        s.load_table(NS, "inc").await,
        before,
        "plans change nothing"
    );

    // A plan task whose snapshot expired since is gone (404), as is a stranger's.
    let task = |request: Value| {
        let uuid = table.uuid().to_string();
        let text = json!({ "table-uuid": uuid, "offset": 0, "request": request }).to_string();
        json!({ "plan-task": URL_SAFE_NO_PAD.encode(text) })
    };
    let tasks_url = format!("{}/tasks", table_url(NS, "inc"));
    let ok = s
        .post(&tasks_url, &task(json!({ "snapshot-id": 1 })))
        .await
        .ok(200)
        .json();
    assert_eq!(paths(&ok), [at("a"), at("b")]);
    s.commit(
        NS,
        "inc",
        json!({ "updates": [{ "action": "remove-snapshots", "snapshot-ids": [1] }] }),
    )
    .await
    .ok(200);
    for request in [
        json!({ "snapshot-id": 1 }),
        json!({ "start-snapshot-id": 2, "end-snapshot-id": 1 }),
    ] {
        s.post(&tasks_url, &task(request))
            .await
            .error(404, "NoSuchPlanTaskException");
    }
    // The range may start at the expired snapshot: its child still names it.
    let ok = s.post(&tasks_url, &task(range(1, 4))).await.ok(200).json();
    assert_eq!(paths(&ok), [at("c"), at("d")]);
}

#[tokio::test]
async fn bad_plans_are_4xx_and_change_nothing() {
    let s = Server::start().await;
    s.create_namespace(NS).await;
    let table = partitioned_table(&s, "t").await;
    let url = plan_url("t");

    // No snapshot yet: an empty plan.
    let empty = s.post(&url, &json!({})).await.ok(200).json();
    assert_eq!(empty["file-scan-tasks"], json!([]), "{empty}");

    // One value more than a filter may hold (every planned file would carry them).
    let too_many: Vec<i64> = (0..=floe::catalog::scan::filter::MAX_FILTER_VALUES as i64).collect();
    for (body, status, kind, says) in [
        (
            json!({ "filter": { "type": "in", "term": "id", "values": too_many } }),
            400,
            "BadRequestException",
            "at most 10000 literal values",
        ),
        (
            json!({ "filter": { "type": "eq", "term": "nope", "value": 1 } }),
            400,
            "BadRequestException",
            "Cannot find field 'nope'",
        ),
        (
            json!({ "filter": { "type": "eq", "term": "id", "value": "x" } }),
            400,
            "BadRequestException",
            "not a valid long",
        ),
        (
            json!({ "filter": { "type": "teleport" } }),
            400,
            "BadRequestException",
            "Unknown filter expression type",
        ),
        // Once a panic that dropped the connection.
        (
            json!({ "filter": { "type": "eq", "value": 5,
                "term": { "type": "transform", "transform": "truncate[0]", "term": "id" } } }),
            400,
            "BadRequestException",
            "positive width",
        ),
        (
            json!({ "select": ["id", "nope"] }),
            400,
            "BadRequestException",
            "Cannot find field 'nope'",
        ),
        (
            json!({ "stats-fields": ["nope"] }),
            400,
            "BadRequestException",
            "Cannot find field 'nope'",
        ),
        (
            json!({ "snapshot-id": 42 }),
            400,
            "IllegalArgumentException",
            "Cannot find snapshot with ID 42",
        ),
        (
            json!({ "snapshot-id": 1, "start-snapshot-id": 1, "end-snapshot-id": 2 }),
            400,
            "BadRequestException",
            "not both",
        ),
        (
            json!({ "start-snapshot-id": 1 }),
            400,
            "BadRequestException",
            "needs end-snapshot-id",
        ),
        (
            json!({ "start-snapshot-id": 1, "end-snapshot-id": 2 }),
            400,
            "IllegalArgumentException",
            "Cannot find snapshot with ID 2",
        ),
        (
            json!({ "case-sensitive": "yes" }),
            400,
            "BadRequestException",
            "expected a boolean",
        ),
    ] {
        let message = s.post(&url, &body).await.error(status, kind);
        assert!(message.contains(says), "{body}: {message}");
    }
    let tasks = format!("{}/tasks", table_url(NS, "t"));
    for task in ["", "garbage", "eyJ0YWJsZS11dWlkIjoieCJ9"] {
        s.post(&tasks, &json!({ "plan-task": task }))
            .await
            .error(404, "NoSuchPlanTaskException");
    }
    s.post(&tasks, &json!({}))
        .await
        .error(400, "BadRequestException");
    s.post(&format!("{}/plan", table_url(NS, "missing")), &json!({}))
        .await
        .error(404, "NoSuchTableException");

    // A manifest list outside the table's locations is not read (403); a missing one is
    // a 404. Neither plan changes the table.
    let outside = format!("{}/snap-1.avro", s.outside());
    s.files.write(&outside, b"not avro".to_vec()).await;
    commit_snapshot_pointing_at(&s, "t", &outside).await;
    let before = s.load_table(NS, "t").await;
    let message = s
        .post(&url, &json!({}))
        .await
        .error(403, "ForbiddenException");
    assert!(
        message.contains("outside the table's locations"),
        "{message}"
    );
    let missing = format!("{}/metadata/gone.avro", table.location());
    s.commit(
        NS,
        "t",
        json!({ "updates": [
            { "action": "add-snapshot", "snapshot": {
                "snapshot-id": 2, "parent-snapshot-id": 1, "sequence-number": 2,
                "timestamp-ms": now_ms(), "manifest-list": missing,
                "summary": { "operation": "append" }, "schema-id": 0 } },
        ]}),
    )
    .await
    .ok(200);
    let message = s
        .post(&url, &json!({ "snapshot-id": 2 }))
        .await
        .error(404, "NotFoundException");
    assert!(message.contains("does not exist"), "{message}");
    let after = s.load_table(NS, "t").await;
    assert_eq!(
        before["metadata"]["current-snapshot-id"],
        after["metadata"]["current-snapshot-id"]
    );
}

/// Commits snapshot 1 with a manifest list the test names (no manifests written), written
/// with the table's current schema.
async fn commit_snapshot_pointing_at(s: &Server, name: &str, list: &str) {
    let schema_id = metadata(s, name).await.current_schema_id();
    s.commit(
        NS,
        name,
        json!({ "updates": [
            { "action": "add-snapshot", "snapshot": {
                "snapshot-id": 1, "sequence-number": 1, "timestamp-ms": now_ms(),
                "manifest-list": list, "summary": { "operation": "append" },
                "schema-id": schema_id } },
            { "action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 1 },
        ]}),
    )
    .await
    .ok(200);
}

/// Several manifests too many tasks for one answer: the plan is split by manifests, each
/// plan task answers its own, and the delete files reach data files in every group.
#[tokio::test]
async fn large_plans_over_several_manifests_are_split_by_manifest() {
    let s = Server::start().await;
    s.create_namespace(NS).await;
    let table = partitioned_table(&s, "wide").await;
    let at = |f: &str| format!("{}/{f}", table.location());
    let per_manifest = floe::catalog::scan::PAGE_TASKS * 2 / 5;
    let mut manifests = Vec::new();
    for m in 0..3 {
        let files = (0..per_manifest)
            .map(|i| {
                let part = if i % 2 == 0 { "even" } else { "odd" };
                data_file(&at(&format!("data/m{m}-{i:06}.parquet")), part, (1, 2))
            })
            .collect();
        manifests
            .push(manifest(&s, &table, at(&format!("metadata/m{m}.avro")), files, false).await);
    }
    let deletes = vec![position_deletes(&at("data/odd-deletes.parquet"), "odd")];
    manifests.push(manifest(&s, &table, at("metadata/deletes.avro"), deletes, true).await);
    commit_snapshot(&s, "wide", at("metadata/snap-1.avro"), manifests).await;

    let tasks_url = format!("{}/tasks", table_url(NS, "wide"));
    // An incremental scan reads what was appended: no delete files.
    let check = |answer: &Value, seen: &mut BTreeSet<String>, incremental: bool| {
        let deletes = answer["delete-files"].as_array().unwrap();
        for task in answer["file-scan-tasks"].as_array().unwrap() {
            let path = task["data-file"]["file-path"].as_str().unwrap();
            assert!(seen.insert(path.to_owned()), "{path} planned twice");
            let odd = task["data-file"]["partition"] == json!(["odd"]);
            let references = task.get("delete-file-references");
            assert_eq!(references.is_some(), odd && !incremental, "{task}");
            if let Some(references) = references {
                let index = references[0].as_u64().unwrap() as usize;
                assert_eq!(deletes[index]["file-path"], at("data/odd-deletes.parquet"));
            }
        }
    };
    for filter in [
        json!({}),
        json!({ "filter": { "type": "eq", "term": "id", "value": 1 } }),
        json!({ "end-snapshot-id": 1 }),
    ] {
        let incremental = filter.get("end-snapshot-id").is_some();
        let first = s.post(&plan_url("wide"), &filter).await.ok(200).json();
        // Two manifests fill the first answer; the third is one plan task.
        assert_eq!(
            first["file-scan-tasks"].as_array().unwrap().len(),
            2 * per_manifest,
            "{filter}"
        );
        let plan_tasks = first["plan-tasks"].as_array().unwrap().clone();
        assert_eq!(plan_tasks.len(), 1, "{filter}");
        let mut seen = BTreeSet::new();
        check(&first, &mut seen, incremental);
        let rest = s
            .post(&tasks_url, &json!({ "plan-task": plan_tasks[0] }))
            .await
            .ok(200)
            .json();
        assert!(rest.get("plan-tasks").is_none(), "{filter}");
        assert_eq!(
            rest["file-scan-tasks"].as_array().unwrap().len(),
            per_manifest
        );
        check(&rest, &mut seen, incremental);
        assert_eq!(seen.len(), 3 * per_manifest, "{filter}: every file once");
        // A task edited to name no manifests (an empty or inverted range) is no task.
        let text = URL_SAFE_NO_PAD
            .decode(plan_tasks[0].as_str().unwrap())
            .unwrap();
        let mut edited: Value = serde_json::from_slice(&text).unwrap();
        edited["manifests"] = json!([2, 1]);
        let edited = URL_SAFE_NO_PAD.encode(edited.to_string());
        s.post(&tasks_url, &json!({ "plan-task": edited }))
            .await
            .error(404, "NoSuchPlanTaskException");
    }
    // A filter that keeps a partition fits one answer again.
    let odd = json!({ "filter": { "type": "eq", "term": "data", "value": "odd" } });
    let answer = s.post(&plan_url("wide"), &odd).await.ok(200).json();
    assert!(answer.get("plan-tasks").is_none());
    let mut seen = BTreeSet::new();
    check(&answer, &mut seen, false);
    assert_eq!(seen.len(), 3 * per_manifest / 2);
}

#[tokio::test]
async fn large_plans_come_in_pages_through_plan_tasks() {
    let s = Server::start().await;
    s.create_namespace(NS).await;
    let table = partitioned_table(&s, "big").await;
    let count = floe::catalog::scan::PAGE_TASKS + 5;
    let files = (0..count)
        .map(|i| {
            let path = format!("{}/data/f-{i:06}.parquet", table.location());
            data_file(
                &path,
                if i % 2 == 0 { "even" } else { "odd" },
                (i as i64, i as i64),
            )
        })
        .collect();
    let m = manifest(
        &s,
        &table,
        format!("{}/metadata/m.avro", table.location()),
        files,
        false,
    )
    .await;
    commit_snapshot(
        &s,
        "big",
        format!("{}/metadata/snap-1.avro", table.location()),
        vec![m],
    )
    .await;

    let first = s.post(&plan_url("big"), &json!({})).await.ok(200).json();
    assert_eq!(
        first["file-scan-tasks"].as_array().unwrap().len(),
        floe::catalog::scan::PAGE_TASKS
    );
    // Without a filter or delete files the manifests are read, not scanned: the files
    // come out the same as through the scan (a filter every row passes).
    let everything = json!({ "filter": { "type": "not-null", "term": "id" } });
    let scanned = s.post(&plan_url("big"), &everything).await.ok(200).json();
    let data_files = |answer: &Value| -> Vec<Value> {
        let tasks = answer["file-scan-tasks"].as_array().unwrap();
        tasks.iter().map(|t| t["data-file"].clone()).collect()
    };
    assert_eq!(data_files(&first), data_files(&scanned));
    assert_eq!(first["plan-tasks"].as_array().map(Vec::len), Some(1));
    assert_eq!(scanned["plan-tasks"].as_array().map(Vec::len), Some(1));
    let task = first["plan-tasks"][0]
        .as_str()
        .expect("a plan task")
        .to_owned();
    // A commit in between does not move the pinned plan.
    s.set_table_properties(NS, "big", json!({ "k": "v" })).await;
    let tasks_url = format!("{}/tasks", table_url(NS, "big"));
    let rest = s
        .post(&tasks_url, &json!({ "plan-task": task }))
        .await
        .ok(200)
        .json();
    assert_eq!(
        rest["file-scan-tasks"].as_array().unwrap().len(),
        5,
        "{rest}"
    );
    assert!(rest.get("plan-tasks").is_none());
    let mut seen: BTreeSet<String> = paths(&first).into_iter().collect();
    seen.extend(paths(&rest));
    assert_eq!(seen.len(), count, "pages neither overlap nor miss files");
    // A rename in between does not change what the plan's names mean: its filter named
    // the long `id`, and its pages still read it so (not the string column that has the
    // name now, whose type the literal does not fit: a 400).
    let at_least = json!({ "filter": { "type": "gt-eq", "term": "id", "value": 0 } });
    let filtered = s.post(&plan_url("big"), &at_least).await.ok(200).json();
    let filtered_task = filtered["plan-tasks"][0].as_str().unwrap().to_owned();
    s.commit(
        NS,
        "big",
        json!({ "updates": [
            { "action": "add-schema", "schema": { "type": "struct", "schema-id": 1, "fields": [
                { "id": 1, "name": "key", "required": true, "type": "long" },
                { "id": 2, "name": "id", "required": false, "type": "string" }
            ]}},
            { "action": "set-current-schema", "schema-id": -1 },
        ]}),
    )
    .await
    .ok(200);
    let rest = s
        .post(&tasks_url, &json!({ "plan-task": filtered_task }))
        .await
        .ok(200)
        .json();
    assert_eq!(paths(&rest).len(), 5, "{rest}");

    // An incremental plan's pages are pinned by its end snapshot.
    let first = s
        .post(&plan_url("big"), &json!({ "end-snapshot-id": 1 }))
        .await
        .ok(200)
        .json();
    let task = first["plan-tasks"][0]
        .as_str()
        .expect("a plan task")
        .to_owned();
    let rest = s
        .post(&tasks_url, &json!({ "plan-task": task }))
        .await
        .ok(200)
        .json();
    let mut seen: BTreeSet<String> = paths(&first).into_iter().collect();
    seen.extend(paths(&rest));
    assert_eq!(
        seen.len(),
        count,
        "incremental pages neither overlap nor miss files"
    );

    // Another table's plan task is not this table's.
    partitioned_table(&s, "other").await;
    s.post(
        &format!("{}/tasks", table_url(NS, "other")),
        &json!({ "plan-task": task }),
    )
    .await
    .error(404, "NoSuchPlanTaskException");
}
