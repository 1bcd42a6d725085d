//! A staged table's reach before its commit. A staged create that delegates access holds
//! its location ([`Reservation`], `store/reservations.rs`): while vended credentials live,
//! or, for remote signing, while the requests it signs stay usable. Until the create's
//! own commit lands, that hold is also what `/credentials` and `/sign` serve the staged
//! table from, as engines write a staged table's data files before they commit it (Spark's
//! CTAS, PyIceberg's create-table transaction): only to the principal who staged it, and
//! extended as they are used, so that a job longer than one credential's life goes on.
//!
//! Once the commit lands, the hold serves nothing more (the table does) and is never
//! extended again: it only guards the location until what was handed out expires. Nor
//! is it extended past [`MAX_STAGED_MS`] after its staging, or for a caller who may no
//! longer create the table there: a staged create cannot keep a location for good.
//!
//! A request that found no table, then no hold of its caller's or one it may not extend,
//! looks for the table once more (`delegation.rs`, `landed_meanwhile`): the commit may
//! have landed between its two looks.

use super::delegation::TableConfig;
use super::error::{CatalogError, CatalogResult, Missing};
use super::locations::check_allowed;
use super::{Catalog, RequestContext};
use crate::auth::privileges::{Privilege, Securable};
use crate::model::{now_ms, CatalogRecord, Ident};
use crate::storage::location::{parse_object, ObjectLocation};
use crate::store::reservations::Reservation;
use crate::store::{Mutation, WriteBatch};

/// How long past what it covers a hold lasts: clocks of nodes, of STS and of the object
/// store may disagree by this much.
const RESERVATION_GRACE_MS: i64 = 60_000;

/// How long after its staging a staged table may still be written to (credentials or
/// signatures reaching past this are refused): a day, longer than any engine's job
/// between a staged create and its commit should take.
const MAX_STAGED_MS: i64 = 24 * 3_600_000;

/// How long a signed request stays usable: S3 takes a signature up to 15 minutes after
/// the time it carries (`RequestTimeTooSkewed` beyond).
const SIGNATURE_LIFE_MS: i64 = 15 * 60_000;

/// Where a table's credentials and signatures reach: its location (without the trailing
/// `/`) in the forms the delegation code scopes by, and for a staged table the hold it
/// is served from.
pub(super) struct Reach {
    pub location: String,
    pub locations: Vec<ObjectLocation>,
    pub hold: Option<Reservation>,
}

impl Catalog {
    /// Until when a staged create answered with `config` must hold its location, if at
    /// all: the expiry of its credentials, or, for remote signing, a signing hold's
    /// length; plus the grace. Nothing when it delegates nothing (its location is
    /// checked only when it commits).
    pub(super) fn staged_hold_until(&self, config: &TableConfig, now: i64) -> Option<i64> {
        let until = match config.expires_at_ms() {
            Some(expires) => expires,
            None if config.signs() => now.saturating_add(self.signing_hold_ms()),
            None => return None,
        };
        Some(until.saturating_add(RESERVATION_GRACE_MS))
    }

    /// How far a remote-signing staged create's hold reaches: the credentials' lifetime,
    /// and at least two signatures' lives, so that a hold is extended at most every
    /// quarter of an hour however short-lived credentials are.
    fn signing_hold_ms(&self) -> i64 {
        let lifetime = self.settings.credential_lifetime.as_millis();
        i64::try_from(lifetime)
            .unwrap_or(i64::MAX)
            .max(2 * SIGNATURE_LIFE_MS)
    }

    /// The location `ident` is staged at by the caller, when `missing` (the table's
    /// load failed: no such table) and a staged create of theirs holds one that has not
    /// landed; otherwise `missing` again, as for any other table that does not exist.
    /// The newest staging wins where a retried create staged several locations. As for
    /// the staged create itself, the caller must (still) be allowed to create the table,
    /// and the location must (still) lie where the catalog allows.
    pub(super) async fn staged_location(
        &self,
        ctx: &RequestContext,
        record: &CatalogRecord,
        ident: &Ident,
        missing: CatalogError,
    ) -> CatalogResult<Reach> {
        if !matches!(
            missing,
            CatalogError::NotFound {
                missing: Missing::Table,
                ..
            }
        ) {
            return Err(missing);
        }
        let holds = self.store.staged_holds(record.id, ident, now_ms()).await?;
        let Some(hold) = holds
            .into_iter()
            .filter(|h| h.principal == ctx.principal.name)
            .max_by_key(|h| h.staged_ms)
        else {
            return Err(missing);
        };
        let parent = Securable::namespace(&ident.namespace);
        ctx.require(&record.name, Privilege::TABLE_CREATE, &parent)?;
        check_allowed(record, &hold.location)?;
        let location = hold.location.trim_end_matches('/').to_string();
        let locations = vec![parse_object(&location)?];
        Ok(Reach {
            location,
            locations,
            hold: Some(hold),
        })
    }

    /// Keeps `hold` at least until `until` (plus the grace), for credentials just vended
    /// from it. A store write only when it would end sooner; refused, like any hold, if
    /// an object now lies in or around it (the staged create landed meanwhile, or another
    /// took the place after a drop), and past [`MAX_STAGED_MS`] after its staging.
    pub(super) async fn hold_staged_until(
        &self,
        hold: Reservation,
        until: i64,
    ) -> CatalogResult<()> {
        if let Some(extended) = extension(hold, until)? {
            let batch = WriteBatch::new(Mutation::ReserveLocation(extended), now_ms());
            self.apply(batch, None).await?;
        }
        Ok(())
    }

    /// Keeps `hold` for a request signed now: a signature is usable for a quarter of an
    /// hour, so the hold must outlast that; when it would not, it is extended by a
    /// signing hold's length (one write per extension, not per signature).
    pub(super) async fn hold_staged_for_signing(&self, hold: Reservation) -> CatalogResult<()> {
        let now = now_ms();
        let needed = now.saturating_add(SIGNATURE_LIFE_MS + RESERVATION_GRACE_MS);
        if hold.expires_ms >= needed {
            return Ok(());
        }
        self.hold_staged_until(hold, now.saturating_add(self.signing_hold_ms()))
            .await
    }
}

/// The hold `hold` extended to cover `until` plus the grace, if it would end sooner
/// (`None`: it already covers it). Refused past [`MAX_STAGED_MS`] after its staging.
fn extension(hold: Reservation, until: i64) -> CatalogResult<Option<Reservation>> {
    let until = until.saturating_add(RESERVATION_GRACE_MS);
    if hold.expires_ms >= until {
        return Ok(None);
    }
    if until > hold.staged_ms.saturating_add(MAX_STAGED_MS) {
        return Err(CatalogError::bad_request(format!(
            "Table {} was staged more than {} hours ago: its staged location is no longer served; stage the create again",
            hold.ident,
            MAX_STAGED_MS / 3_600_000
        )));
    }
    Ok(Some(Reservation {
        expires_ms: until,
        ..hold
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CatalogId, Namespace};

    fn hold(staged_ms: i64, expires_ms: i64) -> Reservation {
        let ident = Ident::new(Namespace::new(vec!["db".into()]).unwrap(), "t".into()).unwrap();
        Reservation {
            catalog: CatalogId(1),
            ident,
            location: "s3://lake/db/t/".into(),
            table_uuid: "u".into(),
            principal: "root".into(),
            expires_ms,
            staged_ms,
        }
    }

    #[test]
    fn a_hold_that_covers_the_credentials_is_not_written_again() {
        let h = hold(0, 10 * 60_000);
        assert_eq!(
            extension(h, 10 * 60_000 - RESERVATION_GRACE_MS).unwrap(),
            None
        );
    }

    #[test]
    fn a_hold_is_extended_to_the_credentials_expiry_plus_the_grace() {
        let h = hold(0, 10 * 60_000);
        let until = 3_600_000;
        let extended = extension(h.clone(), until).unwrap().unwrap();
        assert_eq!(extended.expires_ms, until + RESERVATION_GRACE_MS);
        assert_eq!(
            (extended.staged_ms, extended.location),
            (h.staged_ms, h.location)
        );
    }

    #[test]
    fn no_hold_reaches_past_a_day_after_its_staging() {
        let staged = 1_000_000;
        // The last extension allowed ends exactly a day after the staging.
        let last = staged + MAX_STAGED_MS - RESERVATION_GRACE_MS;
        let extended = extension(hold(staged, staged), last).unwrap().unwrap();
        assert_eq!(extended.expires_ms, staged + MAX_STAGED_MS);
        let refused = extension(hold(staged, staged), last + 1).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("staged more than 24 hours ago"),
            "{refused}"
        );
    }
}
