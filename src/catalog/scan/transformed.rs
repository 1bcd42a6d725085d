//! A filter's comparison of a transform term, rewritten as a predicate on the column, so
//! that iceberg-rust's scan (which takes column references only) prunes manifests and
//! files by it: `day(ts) = '2024-01-31'` becomes `ts >= 2024-01-31T00:00 AND ts <
//! 2024-02-01T00:00`, which the scan then projects onto a `day(ts)` partition, or onto
//! `month(ts)`, or compares with the files' column bounds.
//!
//! The rewrite is exact for the monotonic transforms that map ranges to ranges (year,
//! month, day, hour; truncate of integers) and a superset for truncated strings (only
//! where no `not` encloses them: negated, a superset would become a subset). Rows
//! whose column is null are always kept: how a comparison through a transform treats a
//! null is the residual's business (the whole comparison stays in it). What cannot be
//! rewritten (bucket, void, truncated decimals and binaries, a bound that overflows)
//! gives `None`, and the caller keeps every file; the plan then leaves out the files whose
//! partition values rule the comparison out (`residual.rs`).
//!
//! Pure: the comparison, its column and its transform go in.

use chrono::NaiveDate;
use iceberg::expr::{Predicate, Reference};
use iceberg::spec::{Datum, PrimitiveLiteral, PrimitiveType, Transform};

/// A transform of a column, as a filter's term names it.
pub struct TransformTerm {
    pub column: Reference,
    pub column_type: PrimitiveType,
    pub transform: Transform,
}

impl TransformTerm {
    /// The comparison `kind` of the transformed column with `values` (typed as the
    /// transform's result), as a predicate on the column that holds wherever the
    /// comparison may. `negated`: an odd number of `not`s encloses it, so that the
    /// predicate is written to keep null rows once negated.
    pub fn rewrite(&self, kind: &str, values: &[Datum], negated: bool) -> Option<Predicate> {
        // void(c) is null whatever c holds: nothing to say about c.
        if matches!(self.transform, Transform::Void | Transform::Unknown) {
            return None;
        }
        // A truncated string's rewrite is wider than the comparison: under a `not` it
        // would turn narrower, which would lose files.
        let widened = matches!(self.transform, Transform::Truncate(_))
            && self.column_type == PrimitiveType::String;
        if negated && widened && !matches!(kind, "is-null" | "not-null") {
            return None;
        }
        let column = || self.column.clone();
        let exact = match kind {
            // A transform of a null is null, of anything else not null.
            "is-null" => return Some(column().is_null()),
            "not-null" => return Some(column().is_not_null()),
            "lt" | "lt-eq" | "gt" | "gt-eq" | "eq" | "not-eq" => {
                self.compare(kind, values.first()?)?
            }
            "in" | "not-in" => {
                let each = if kind == "in" { "eq" } else { "not-eq" };
                let mut all = Vec::with_capacity(values.len());
                for value in values {
                    all.push(self.compare(each, value)?);
                }
                let fold = |a: Predicate, b: Predicate| {
                    if kind == "in" {
                        a.or(b)
                    } else {
                        a.and(b)
                    }
                };
                let empty = if kind == "in" {
                    Predicate::AlwaysFalse
                } else {
                    Predicate::AlwaysTrue
                };
                all.into_iter().reduce(fold).unwrap_or(empty)
            }
            "starts-with" => self.prefix(values.first()?)?,
            _ => return None,
        };
        // Null rows kept, whichever way the enclosing `not`s turn the predicate.
        Some(if negated {
            exact.and(column().is_not_null())
        } else {
            exact.or(column().is_null())
        })
    }

    /// One comparison with one transformed value.
    fn compare(&self, kind: &str, value: &Datum) -> Option<Predicate> {
        if let (Transform::Truncate(width), PrimitiveLiteral::String(text)) =
            (self.transform, value.literal())
        {
            return self.truncated_text(kind, width, text);
        }
        let v = match value.literal() {
            PrimitiveLiteral::Int(v) => i64::from(*v),
            PrimitiveLiteral::Long(v) => *v,
            _ => return None,
        };
        // The transform is monotonic: its value is >= v exactly from start(v) on.
        let from = || self.start(v);
        let after = || self.start(v.checked_add(1)?);
        let column = || self.column.clone();
        Some(match kind {
            "lt" => column().less_than(from()?),
            "gt-eq" => column().greater_than_or_equal_to(from()?),
            "lt-eq" => column().less_than(after()?),
            "gt" => column().greater_than_or_equal_to(after()?),
            "eq" => column()
                .greater_than_or_equal_to(from()?)
                .and(column().less_than(after()?)),
            "not-eq" => column()
                .less_than(from()?)
                .or(column().greater_than_or_equal_to(after()?)),
            _ => return None,
        })
    }

    /// The least column value whose transform is at least `v`, as a column value.
    fn start(&self, v: i64) -> Option<Datum> {
        const MICROS_A_DAY: i64 = 86_400_000_000;
        const MICROS_AN_HOUR: i64 = 3_600_000_000;
        let days = |date: NaiveDate| Some((date - NaiveDate::from_ymd_opt(1970, 1, 1)?).num_days());
        let micros = match self.transform {
            Transform::Truncate(width) => {
                let width = i128::from(width);
                let start = -(-i128::from(v)).div_euclid(width) * width;
                return match self.column_type {
                    PrimitiveType::Int => i32::try_from(start).ok().map(Datum::int),
                    PrimitiveType::Long => i64::try_from(start).ok().map(Datum::long),
                    _ => None,
                };
            }
            Transform::Hour => v.checked_mul(MICROS_AN_HOUR)?,
            Transform::Day => v.checked_mul(MICROS_A_DAY)?,
            Transform::Month => {
                let year = i32::try_from(1970 + v.div_euclid(12)).ok()?;
                let month = u32::try_from(v.rem_euclid(12) + 1).ok()?;
                days(NaiveDate::from_ymd_opt(year, month, 1)?)?.checked_mul(MICROS_A_DAY)?
            }
            Transform::Year => {
                let year = i32::try_from(1970i64.checked_add(v)?).ok()?;
                days(NaiveDate::from_ymd_opt(year, 1, 1)?)?.checked_mul(MICROS_A_DAY)?
            }
            _ => return None,
        };
        Some(match self.column_type {
            PrimitiveType::Date if micros % MICROS_A_DAY == 0 => {
                Datum::date(i32::try_from(micros / MICROS_A_DAY).ok()?)
            }
            PrimitiveType::Timestamp => Datum::timestamp_micros(micros),
            PrimitiveType::Timestamptz => Datum::timestamptz_micros(micros),
            PrimitiveType::TimestampNs => Datum::timestamp_nanos(micros.checked_mul(1000)?),
            PrimitiveType::TimestamptzNs => Datum::timestamptz_nanos(micros.checked_mul(1000)?),
            _ => return None,
        })
    }

    /// `truncate[width](s)` compared with `text`: the truncation is a prefix of `s` no
    /// longer than `width` characters, so what it is at least (or more than), `s` is too,
    /// and equal to a full-width text, `s` starts with it.
    fn truncated_text(&self, kind: &str, width: u32, text: &str) -> Option<Predicate> {
        let column = || self.column.clone();
        // A prefix goes on to iceberg-rust's projections, which count a prefix's bytes
        // against a width in characters: only ASCII ones are safe there.
        let fits = text.chars().count() <= width as usize && text.is_ascii();
        Some(match kind {
            "gt-eq" => column().greater_than_or_equal_to(Datum::string(text)),
            "gt" => column().greater_than(Datum::string(text)),
            "eq" if fits => column().starts_with(Datum::string(text)),
            _ => return None,
        })
    }

    /// `starts-with` on a truncated string: `s` starts with any prefix its truncation
    /// starts with (no longer than the width).
    fn prefix(&self, value: &Datum) -> Option<Predicate> {
        match (self.transform, value.literal()) {
            (Transform::Truncate(width), PrimitiveLiteral::String(text))
                if text.chars().count() <= width as usize && text.is_ascii() =>
            {
                Some(self.column.clone().starts_with(value.clone()))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(transform: Transform, column_type: PrimitiveType) -> TransformTerm {
        TransformTerm {
            column: Reference::new("c"),
            column_type,
            transform,
        }
    }

    fn rewritten(term: &TransformTerm, kind: &str, values: &[Datum]) -> String {
        term.rewrite(kind, values, false)
            .map(|p| p.to_string())
            .unwrap_or_else(|| "none".into())
    }

    #[test]
    fn temporal_transforms_become_ranges_of_the_column() {
        let day = term(Transform::Day, PrimitiveType::Timestamp);
        let d = [Datum::date(19_753)]; // 2024-01-31
        let p = rewritten(&day, "eq", &d);
        assert!(p.contains("c >= 2024-01-31 00:00:00"), "{p}");
        assert!(p.contains("c < 2024-02-01 00:00:00"), "{p}");
        assert!(p.contains("c IS NULL"), "{p}");
        let p = rewritten(&day, "lt-eq", &d);
        assert!(p.contains("c < 2024-02-01 00:00:00"), "{p}");
        let p = rewritten(&day, "gt", &d);
        assert!(p.contains("c >= 2024-02-01 00:00:00"), "{p}");

        // Months and years from 1970, before it too.
        let month = term(Transform::Month, PrimitiveType::Date);
        let p = rewritten(&month, "gt-eq", &[Datum::int(649)]); // 2024-02
        assert!(p.contains("c >= 2024-02-01"), "{p}");
        let p = rewritten(&month, "lt", &[Datum::int(-1)]); // 1969-12
        assert!(p.contains("c < 1969-12-01"), "{p}");
        let year = term(Transform::Year, PrimitiveType::TimestamptzNs);
        let p = rewritten(&year, "eq", &[Datum::int(54)]);
        assert!(p.contains("2024-01-01") && p.contains("2025-01-01"), "{p}");

        // hour of a date does not exist; a bound past the column's range keeps all.
        let hour = term(Transform::Hour, PrimitiveType::Date);
        assert_eq!(rewritten(&hour, "eq", &[Datum::int(3)]), "none");
        let far = term(Transform::Year, PrimitiveType::Timestamp);
        assert_eq!(rewritten(&far, "lt", &[Datum::int(i32::MAX)]), "none");
    }

    #[test]
    fn truncated_integers_round_up_to_their_width() {
        let t = term(Transform::Truncate(10), PrimitiveType::Long);
        let p = rewritten(&t, "eq", &[Datum::long(20)]);
        assert!(p.contains("c >= 20") && p.contains("c < 30"), "{p}");
        // truncate(x) < 25 is truncate(x) <= 20: x < 30.
        let p = rewritten(&t, "lt-eq", &[Datum::long(25)]);
        assert!(p.contains("c < 30"), "{p}");
        let p = rewritten(&t, "gt-eq", &[Datum::long(-15)]);
        assert!(p.contains("c >= -10"), "{p}");
        let p = rewritten(&t, "in", &[Datum::long(0), Datum::long(40)]);
        assert!(p.contains("c >= 40") && p.contains("c < 10"), "{p}");
    }

    #[test]
    fn truncated_strings_keep_a_superset() {
        let t = term(Transform::Truncate(3), PrimitiveType::String);
        let text = |s: &str| [Datum::string(s)];
        assert!(rewritten(&t, "eq", &text("abc")).contains("STARTS WITH"));
        assert!(rewritten(&t, "starts-with", &text("ab")).contains("STARTS WITH"));
        assert!(rewritten(&t, "gt", &text("abc")).contains("c > \"abc\""));
        assert_eq!(rewritten(&t, "lt", &text("abc")), "none");
        assert_eq!(rewritten(&t, "starts-with", &text("abcd")), "none");
        assert_eq!(rewritten(&t, "starts-with", &text("éa")), "none");
        assert_eq!(rewritten(&t, "eq", &text("éab")), "none");
        // Under a `not`, a wider predicate would become a narrower one.
        assert!(t.rewrite("gt-eq", &text("abc"), true).is_none());
    }

    #[test]
    fn null_rows_are_kept_under_a_not_and_buckets_and_voids_are_not_rewritten() {
        let day = term(Transform::Day, PrimitiveType::Date);
        let p = day
            .rewrite("eq", &[Datum::date(10)], true)
            .unwrap()
            .negate()
            .to_string();
        assert!(p.contains("IS NULL"), "{p}");
        assert_eq!(rewritten(&day, "is-null", &[]), "c IS NULL");
        let bucket = term(Transform::Bucket(4), PrimitiveType::Long);
        assert_eq!(rewritten(&bucket, "eq", &[Datum::int(1)]), "none");
        // void(c) is null in every row, whatever c is.
        let void = term(Transform::Void, PrimitiveType::Long);
        assert_eq!(rewritten(&void, "is-null", &[]), "none");
    }
}
