//! The REST events query: a catalog's change events, read from the outbox page by page
//! (the rules of a query are in `events::query`).

use serde_json::{json, Value};

use super::error::{CatalogError, CatalogResult, Missing};
use super::{Catalog, RequestContext};
use crate::auth::privileges::{Privilege, Securable};
use crate::events::query::{
    encode_token, EventQuery, Page, QueryError, QueryEventsRequest, MAX_PAGE_BYTES,
};
use crate::model::{CatalogRecord, Ident, Namespace};
use crate::store::EventRead;

impl Catalog {
    /// One page of the catalog's events after the request's continuation token, and the
    /// token to go on from (also when the page is empty: it is where new events will
    /// appear). Events name every table and view of the catalog, so reading them takes
    /// `CATALOG_MANAGE_METADATA`.
    pub async fn query_events(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        request: QueryEventsRequest,
    ) -> CatalogResult<Value> {
        ctx.require(
            catalog,
            Privilege::CATALOG_MANAGE_METADATA,
            &Securable::Catalog,
        )?;
        let record = self.get_catalog(catalog).await?;
        let bounds = self.store.event_bounds().await?;
        let query = EventQuery::parse(&request, record.id, bounds).map_err(|e| match e {
            QueryError::BadRequest(m) => CatalogError::BadRequest(m),
            QueryError::Gone(m) => CatalogError::Gone(m),
        })?;
        for name in request.catalog_objects_by_name.iter().flatten() {
            self.require_object_named(&record, name).await?;
        }
        let mut page = Page::new(query.after, MAX_PAGE_BYTES);
        'pages: loop {
            let read = EventRead {
                after: page.after,
                catalog: Some(record.id),
                limit: query.page_size.max(100),
                // No more than the page may hold (plus the event that overflows it).
                max_bytes: MAX_PAGE_BYTES,
            };
            let batch = self.store.read_events(&read).await?;
            if batch.is_empty() {
                break;
            }
            for event in &batch {
                if !page.offer(event, &query) {
                    break 'pages;
                }
            }
        }
        Ok(json!({
            "continuation-token": encode_token(record.id, page.after),
            "events": page.events,
        }))
    }

    /// A name filter must name a namespace, table, view or policy that exists now (404
    /// otherwise): names change, so the history of a dropped or renamed object is found
    /// by its uuid (`catalog-objects-by-uuid`), which never changes.
    async fn require_object_named(
        &self,
        record: &CatalogRecord,
        name: &[String],
    ) -> CatalogResult<()> {
        let catalog = record.name.as_str();
        let namespace = Namespace::new(name.to_vec())?;
        if self
            .store
            .get_namespace(catalog, &namespace)
            .await?
            .is_some()
        {
            return Ok(());
        }
        if let Some((last, parent)) = name.split_last() {
            if !parent.is_empty() {
                let ident = Ident::new(Namespace::new(parent.to_vec())?, last.clone())?;
                if self.store.load_object(catalog, &ident).await?.is_some() {
                    return Ok(());
                }
                let (_, policies) = self.policy_state(record).await?;
                if policies.find(&ident.namespace, &ident.name).is_some() {
                    return Ok(());
                }
            }
        }
        Err(CatalogError::not_found(
            Missing::Namespace,
            format!(
                "No namespace, table, view or policy is named {} (a dropped or renamed object's events are found by its uuid)",
                name.join(".")
            ),
        ))
    }
}
