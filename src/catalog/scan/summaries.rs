//! A manifest list's partition summaries, checked before a filtered scan prunes with
//! them. iceberg-rust's pruning takes a manifest's summary by the position of its spec's
//! field and decodes its bounds with `unwrap`: a list written with fewer summaries than
//! its spec has fields, or with a bound of another width than its type's, would panic the
//! plan. Such a list is the table's files at fault, as an unreadable one is: a 422 naming
//! the manifest.
//!
//! Pure.

use iceberg::spec::{Datum, ManifestFile, Schema, TableMetadata, Type};

use crate::catalog::error::{CatalogError, CatalogResult};
use crate::model::Ident;

/// Refuses with a 422 a plan of `ident` whose `manifests`' partition summaries cannot be
/// pruned with (read with `schema`, the scan's).
pub fn check(
    ident: &Ident,
    metadata: &TableMetadata,
    schema: &Schema,
    manifests: &[ManifestFile],
) -> CatalogResult<()> {
    unprunable(metadata, schema, manifests)
        .map_err(|why| CatalogError::Unprocessable(format!("Cannot plan a scan of {ident}: {why}")))
}

/// Why `manifests`' partition summaries cannot be pruned with, if they cannot.
fn unprunable(
    metadata: &TableMetadata,
    schema: &Schema,
    manifests: &[ManifestFile],
) -> Result<(), String> {
    for manifest in manifests {
        // No summaries: iceberg-rust keeps the manifest without looking.
        let Some(summaries) = manifest.partitions.as_ref().filter(|s| !s.is_empty()) else {
            continue;
        };
        // A spec it cannot find or type, iceberg-rust refuses itself (an error, no panic).
        let Some(spec) = metadata.partition_spec_by_id(manifest.partition_spec_id) else {
            continue;
        };
        let Ok(partition) = spec.partition_type(schema) else {
            continue;
        };
        let path = &manifest.manifest_path;
        let fields = partition.fields();
        if summaries.len() < fields.len() {
            return Err(format!(
                "manifest {path} summarizes {} partition fields where its spec {} has {}",
                summaries.len(),
                spec.spec_id(),
                fields.len()
            ));
        }
        for (field, summary) in fields.iter().zip(summaries) {
            let Type::Primitive(ty) = field.field_type.as_ref() else {
                continue;
            };
            let bounds = [&summary.lower_bound, &summary.upper_bound];
            for bound in bounds.into_iter().flatten() {
                if Datum::try_from_bytes(bound, ty.clone()).is_err() {
                    return Err(format!(
                        "manifest {path} has a bound of partition field {} that is not a {ty} ({} bytes)",
                        field.name,
                        bound.len()
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{
        ByteBuf, FieldSummary, FormatVersion, ManifestContentType, NestedField, PrimitiveType,
        SortOrder, TableMetadataBuilder, Transform, UnboundPartitionSpec,
    };
    use std::sync::Arc;

    fn metadata() -> TableMetadata {
        let schema = Schema::builder()
            .with_fields(vec![Arc::new(NestedField::required(
                1,
                "n",
                iceberg::spec::Type::Primitive(PrimitiveType::Int),
            ))])
            .build()
            .unwrap();
        let spec = UnboundPartitionSpec::builder()
            .add_partition_field(1, "n", Transform::Identity)
            .unwrap()
            .build();
        let (sort, location) = (SortOrder::unsorted_order(), "file:///t".to_string());
        TableMetadataBuilder::new(
            schema,
            spec,
            sort,
            location,
            FormatVersion::V2,
            Default::default(),
        )
        .unwrap()
        .build()
        .unwrap()
        .metadata
    }

    fn manifest(summaries: Vec<FieldSummary>) -> ManifestFile {
        ManifestFile {
            manifest_path: "file:///t/m.avro".into(),
            manifest_length: 0,
            partition_spec_id: 0,
            content: ManifestContentType::Data,
            sequence_number: 0,
            min_sequence_number: 0,
            added_snapshot_id: 0,
            added_files_count: None,
            existing_files_count: None,
            deleted_files_count: None,
            added_rows_count: None,
            existing_rows_count: None,
            deleted_rows_count: None,
            partitions: Some(summaries),
            key_metadata: None,
            first_row_id: None,
        }
    }

    fn summary(bound: &[u8]) -> FieldSummary {
        FieldSummary {
            contains_null: false,
            contains_nan: None,
            lower_bound: Some(ByteBuf::from(bound.to_vec())),
            upper_bound: Some(ByteBuf::from(bound.to_vec())),
        }
    }

    #[test]
    fn summaries_short_of_the_spec_or_of_the_wrong_width_are_refused() {
        let metadata = metadata();
        let schema = metadata.current_schema().clone();
        let check = |summaries| unprunable(&metadata, &schema, &[manifest(summaries)]);
        check(vec![summary(&7i32.to_le_bytes())]).unwrap();
        // No summaries at all: iceberg-rust does not prune, so nothing to check.
        check(Vec::new()).unwrap();
        let error = check(vec![summary(&[1, 2, 3])]).unwrap_err();
        assert!(
            error.contains("not a int") && error.contains("3 bytes"),
            "{error}"
        );
        let spec = UnboundPartitionSpec::builder()
            .add_partition_field(1, "n", Transform::Identity)
            .unwrap()
            .add_partition_field(1, "b", Transform::Bucket(4))
            .unwrap()
            .build();
        let two = (metadata.clone().into_builder(None))
            .add_default_partition_spec(spec)
            .unwrap()
            .build()
            .unwrap()
            .metadata;
        let mut short = manifest(vec![summary(&7i32.to_le_bytes())]);
        short.partition_spec_id = two.default_partition_spec_id();
        let error = unprunable(&two, &schema, &[short]).unwrap_err();
        assert!(error.contains("summarizes 1 partition fields"), "{error}");
    }
}
