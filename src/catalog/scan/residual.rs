//! Each file's residual filter: the scan's filter with what the file's partition values
//! decide already decided. Java's server narrows residuals this way (its
//! `ResidualEvaluator`); iceberg-rust has no such evaluator, so this one works on the
//! REST filter itself, compiled once per partition spec ([`Narrower`]) and applied to each
//! file's partition tuple:
//! - a comparison of an identity-partitioned column, or of a transform term that the spec
//!   partitions by (`bucket[16](id)` in a table partitioned by `bucket(16, id)`), is
//!   decided from the file's value as for a constant;
//! - a comparison of a column partitioned by another transform (`ts >= '2024-01-01'`
//!   under `day(ts)`) goes through iceberg-rust's projections of the comparison onto
//!   that field: `true` when the file's value satisfies the strict projection (every row
//!   matches), `false` when it fails the inclusive one (no row does);
//! - `and`, `or` and `not` then simplify; anything else (other columns, floats, a null
//!   partition value but for `is-null`/`not-null`, a value that does not convert) stays
//!   as it is, which is always right: a residual may be wider than needed, never narrower.
//!
//! A file whose residual is `false` holds no matching row, so the plan leaves it out:
//! that is how transform terms prune (iceberg-rust's scan takes column references only).
//!
//! Pure: the filter, the spec's fields, the schema and the file's partition tuple go in.

use std::cmp::Ordering;

use iceberg::expr::{Bind, Predicate, PredicateOperator};
use iceberg::spec::{
    Datum, NestedFieldRef, PrimitiveLiteral, PrimitiveType, SchemaRef, Struct, Transform, Type,
};
use serde_json::{json, Value};

use super::encode::value_json;
use super::filter::{self, datum};

/// What is left of a filter for one file.
#[derive(Debug, PartialEq)]
pub enum Residual {
    /// Every row of the file matches: no residual.
    True,
    /// No row does.
    False,
    /// The rows must still be checked against this.
    Filter(Value),
}

/// A partition spec's field: its source column's id and its transform.
pub type SpecField = (i32, Transform);

/// The name projections give the partition field (they are evaluated on its value only).
const FIELD: &str = "partition";

/// The filter compiled against one partition spec: for each comparison, which of the
/// spec's fields can decide it and how. Built once per spec, applied to every file.
pub struct Narrower {
    root: Node,
    /// Per spec field, the type of its values when a test reads it (the transform's
    /// result type); `None`: no test reads it.
    types: Vec<Option<PrimitiveType>>,
}

enum Node {
    True,
    False,
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Not(Box<Node>),
    /// A comparison (or anything not understood), and what can decide it.
    Leaf {
        filter: Value,
        tests: Vec<Test>,
    },
}

enum Test {
    /// The field's value is, in every row, the compared term's (an identity field of the
    /// column, or the term's own transform of it).
    Constant { field: usize },
    /// Another transform of the compared column, with the comparison's projections onto
    /// it (`None` where iceberg-rust has none).
    Projected {
        field: usize,
        strict: Option<Predicate>,
        inclusive: Option<Predicate>,
    },
}

/// A value of a file's partition tuple: `None` when it did not convert (nothing is
/// decided from it), `Some(None)` for a null.
type FieldValue = Option<Option<Datum>>;

struct Compiler<'a> {
    schema: &'a SchemaRef,
    fields: &'a [SpecField],
    case_sensitive: bool,
    types: Vec<Option<PrimitiveType>>,
}

impl Narrower {
    pub fn new(
        filter: &Value,
        schema: &SchemaRef,
        fields: &[SpecField],
        case_sensitive: bool,
    ) -> Self {
        let mut compiler = Compiler {
            schema,
            fields,
            case_sensitive,
            types: vec![None; fields.len()],
        };
        let root = compiler.node(filter);
        Narrower {
            root,
            types: compiler.types,
        }
    }

    /// The filter narrowed by one file's partition tuple (in the spec's field order).
    pub fn residual(&self, partition: &Struct) -> Residual {
        let values: Vec<FieldValue> = self
            .types
            .iter()
            .zip(partition.iter())
            .map(|(ty, literal)| {
                let ty = ty.as_ref()?;
                match literal {
                    None => Some(None),
                    // Through the spec's single-value JSON, which `datum` reads as a
                    // filter's literal.
                    Some(literal) => value_json(literal, &Type::Primitive(ty.clone()))
                        .and_then(|json| datum(&json, ty).ok())
                        .map(Some),
                }
            })
            .collect();
        narrow(&self.root, &values, &self.types)
    }
}

impl Compiler<'_> {
    fn node(&mut self, filter: &Value) -> Node {
        let kind = filter.get("type").and_then(Value::as_str).unwrap_or("");
        let mut child = |name: &str| filter.get(name).map(|child| Box::new(self.node(child)));
        match kind {
            "true" => Node::True,
            "false" => Node::False,
            "and" | "or" => match (child("left"), child("right")) {
                (Some(left), Some(right)) if kind == "and" => Node::And(left, right),
                (Some(left), Some(right)) => Node::Or(left, right),
                _ => self.leaf(filter, Vec::new()),
            },
            "not" => match child("child") {
                Some(child) => Node::Not(child),
                None => self.leaf(filter, Vec::new()),
            },
            _ => {
                let tests = self.tests(filter);
                self.leaf(filter, tests)
            }
        }
    }

    fn leaf(&self, filter: &Value, tests: Vec<Test>) -> Node {
        Node::Leaf {
            filter: filter.clone(),
            tests,
        }
    }

    fn column(&self, name: &str) -> Option<(NestedFieldRef, PrimitiveType)> {
        let field = if self.case_sensitive {
            self.schema.field_by_name(name)
        } else {
            self.schema.field_by_name_case_insensitive(name)
        }?;
        match &*field.field_type {
            Type::Primitive(ty) => Some((field.clone(), ty.clone())),
            _ => None,
        }
    }

    /// What can decide one comparison.
    fn tests(&mut self, filter: &Value) -> Vec<Test> {
        let mut tests = Vec::new();
        match filter.get("term") {
            Some(Value::String(name)) => {
                let Some((column, ty)) = self.column(name) else {
                    return tests;
                };
                let kind = filter.get("type").and_then(Value::as_str).unwrap_or("");
                let non_ascii_prefix = matches!(kind, "starts-with" | "not-starts-with")
                    && filter
                        .get("value")
                        .and_then(Value::as_str)
                        .is_some_and(|v| !v.is_ascii());
                // Bound once, only if a field needs a projection.
                let mut bound = None;
                for (i, (source, transform)) in self.fields.iter().enumerate() {
                    if *source != column.id {
                        continue;
                    }
                    if *transform == Transform::Identity {
                        self.types[i] = Some(ty.clone());
                        tests.push(Test::Constant { field: i });
                        continue;
                    }
                    let Ok(Type::Primitive(result)) =
                        transform.result_type(&Type::Primitive(ty.clone()))
                    else {
                        continue;
                    };
                    // iceberg-rust projects a prefix onto `truncate` by its length in
                    // bytes against a width in characters: wrong for non-ASCII prefixes.
                    if non_ascii_prefix {
                        continue;
                    }
                    let bound = bound.get_or_insert_with(|| {
                        filter::predicate(filter, self.schema, self.case_sensitive)
                            .ok()
                            .and_then(|p| p.bind(self.schema.clone(), self.case_sensitive).ok())
                    });
                    let Some(bound) = bound.as_ref() else {
                        continue;
                    };
                    let strict = transform.strict_project(FIELD, bound).ok().flatten();
                    let inclusive = transform.project(FIELD, bound).ok().flatten();
                    if strict.is_some() || inclusive.is_some() {
                        self.types[i] = Some(result);
                        tests.push(Test::Projected {
                            field: i,
                            strict,
                            inclusive,
                        });
                    }
                }
            }
            // A transform term: decided by a field of the same transform of its column.
            Some(Value::Object(term)) => {
                let transform = term
                    .get("transform")
                    .and_then(Value::as_str)
                    .and_then(|t| t.parse::<Transform>().ok());
                let column = term
                    .get("term")
                    .and_then(Value::as_str)
                    .and_then(|name| self.column(name));
                let (Some(transform), Some((column, ty))) = (transform, column) else {
                    return tests;
                };
                let Ok(Type::Primitive(result)) = transform.result_type(&Type::Primitive(ty))
                else {
                    return tests;
                };
                for (i, field) in self.fields.iter().enumerate() {
                    if *field == (column.id, transform) && transform != Transform::Void {
                        self.types[i] = Some(result.clone());
                        tests.push(Test::Constant { field: i });
                    }
                }
            }
            _ => {}
        }
        tests
    }
}

fn narrow(node: &Node, values: &[FieldValue], types: &[Option<PrimitiveType>]) -> Residual {
    let part = |child: &Node| narrow(child, values, types);
    match node {
        Node::True => Residual::True,
        Node::False => Residual::False,
        Node::And(left, right) => match (part(left), part(right)) {
            (Residual::False, _) | (_, Residual::False) => Residual::False,
            (Residual::True, other) | (other, Residual::True) => other,
            (Residual::Filter(l), Residual::Filter(r)) => {
                Residual::Filter(json!({ "type": "and", "left": l, "right": r }))
            }
        },
        Node::Or(left, right) => match (part(left), part(right)) {
            (Residual::True, _) | (_, Residual::True) => Residual::True,
            (Residual::False, other) | (other, Residual::False) => other,
            (Residual::Filter(l), Residual::Filter(r)) => {
                Residual::Filter(json!({ "type": "or", "left": l, "right": r }))
            }
        },
        Node::Not(child) => match part(child) {
            Residual::True => Residual::False,
            Residual::False => Residual::True,
            Residual::Filter(c) => Residual::Filter(json!({ "type": "not", "child": c })),
        },
        Node::Leaf { filter, tests } => {
            let kind = filter.get("type").and_then(Value::as_str).unwrap_or("");
            let decided = tests.iter().find_map(|test| match *test {
                Test::Constant { field } => {
                    let value = values.get(field)?.as_ref()?;
                    decide(kind, filter, types[field].as_ref()?, value.as_ref())
                }
                Test::Projected {
                    field,
                    ref strict,
                    ref inclusive,
                } => {
                    let value = values.get(field)?.as_ref()?.as_ref();
                    if strict.as_ref().and_then(|p| holds(p, value)) == Some(true) {
                        Some(true)
                    } else if inclusive.as_ref().and_then(|p| holds(p, value)) == Some(false) {
                        Some(false)
                    } else {
                        None
                    }
                }
            });
            match decided {
                Some(true) => Residual::True,
                Some(false) => Residual::False,
                None => Residual::Filter(filter.clone()),
            }
        }
    }
}

/// Whether a projected predicate (over the one partition field) holds for its value, if
/// known. Nulls answer only `is-null`/`not-null`, and floats are left alone, as in
/// [`decide`].
fn holds(predicate: &Predicate, value: Option<&Datum>) -> Option<bool> {
    match predicate {
        Predicate::AlwaysTrue => Some(true),
        Predicate::AlwaysFalse => Some(false),
        Predicate::And(e) => {
            let [l, r] = e.inputs();
            match (holds(l, value), holds(r, value)) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            }
        }
        Predicate::Or(e) => {
            let [l, r] = e.inputs();
            match (holds(l, value), holds(r, value)) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            }
        }
        Predicate::Not(e) => holds(e.inputs()[0], value).map(|b| !b),
        Predicate::Unary(e) => match e.op() {
            PredicateOperator::IsNull => Some(value.is_none()),
            PredicateOperator::NotNull => Some(value.is_some()),
            _ => None,
        },
        Predicate::Binary(e) => {
            let value = value.filter(|v| !is_float(v))?;
            let literal = e.literal();
            let order = || value.partial_cmp(literal);
            let prefix = || match (value.literal(), literal.literal()) {
                (PrimitiveLiteral::String(v), PrimitiveLiteral::String(p)) => {
                    Some(v.starts_with(p.as_str()))
                }
                _ => None,
            };
            match e.op() {
                PredicateOperator::LessThan => order().map(|o| o == Ordering::Less),
                PredicateOperator::LessThanOrEq => order().map(|o| o != Ordering::Greater),
                PredicateOperator::GreaterThan => order().map(|o| o == Ordering::Greater),
                PredicateOperator::GreaterThanOrEq => order().map(|o| o != Ordering::Less),
                PredicateOperator::Eq => order().map(|o| o == Ordering::Equal),
                PredicateOperator::NotEq => order().map(|o| o != Ordering::Equal),
                PredicateOperator::StartsWith => prefix(),
                PredicateOperator::NotStartsWith => prefix().map(|p| !p),
                _ => None,
            }
        }
        Predicate::Set(e) => {
            let value = value.filter(|v| !is_float(v))?;
            // A literal of another type than the value's decides nothing.
            if e.literals()
                .iter()
                .any(|l| l.data_type() != value.data_type())
            {
                return None;
            }
            let found = e.literals().contains(value);
            match e.op() {
                PredicateOperator::In => Some(found),
                PredicateOperator::NotIn => Some(!found),
                _ => None,
            }
        }
    }
}

fn is_float(value: &Datum) -> bool {
    matches!(
        value.data_type(),
        PrimitiveType::Float | PrimitiveType::Double
    )
}

/// A comparison's outcome for a file whose column holds `value` in every row, if known.
fn decide(kind: &str, filter: &Value, ty: &PrimitiveType, value: Option<&Datum>) -> Option<bool> {
    match (kind, value) {
        ("is-null", v) => return Some(v.is_none()),
        ("not-null", v) => return Some(v.is_some()),
        (_, None) => return None,
        _ => {}
    }
    let value = value?;
    // Floats compare by their total order here (-0.0 < 0.0), not as rows do: left alone.
    if matches!(ty, PrimitiveType::Float | PrimitiveType::Double) {
        return None;
    }
    let literal = || datum(filter.get("value")?, ty).ok();
    let order = || value.partial_cmp(&literal()?);
    let prefix = || match (value.literal(), literal()?.literal()) {
        (PrimitiveLiteral::String(v), PrimitiveLiteral::String(p)) => {
            Some(v.starts_with(p.as_str()))
        }
        _ => None,
    };
    let member = || {
        let values = filter.get("values")?.as_array()?;
        let mut found = false;
        for v in values {
            found |= datum(v, ty).ok()? == *value;
        }
        Some(found)
    };
    match kind {
        "eq" => order().map(|o| o == Ordering::Equal),
        "not-eq" => order().map(|o| o != Ordering::Equal),
        "lt" => order().map(|o| o == Ordering::Less),
        "lt-eq" => order().map(|o| o != Ordering::Greater),
        "gt" => order().map(|o| o == Ordering::Greater),
        "gt-eq" => order().map(|o| o != Ordering::Less),
        "starts-with" => prefix(),
        "not-starts-with" => prefix().map(|p| !p),
        "in" => member(),
        "not-in" => member().map(|m| !m),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{Literal, NestedField, Schema};
    use std::sync::Arc;

    fn schema() -> SchemaRef {
        let field = |id, name, ty| Arc::new(NestedField::optional(id, name, Type::Primitive(ty)));
        Arc::new(
            Schema::builder()
                .with_fields(vec![
                    Arc::new(NestedField::required(
                        1,
                        "id",
                        Type::Primitive(PrimitiveType::Long),
                    )),
                    field(2, "region", PrimitiveType::String),
                    field(3, "day", PrimitiveType::Date),
                    field(4, "ts", PrimitiveType::Timestamp),
                ])
                .build()
                .unwrap(),
        )
    }

    /// The residual for a file of the given spec and partition tuple.
    fn under(
        fields: &[SpecField],
        partition: Vec<Option<Literal>>,
        filter: Value,
        case_sensitive: bool,
    ) -> Residual {
        Narrower::new(&filter, &schema(), fields, case_sensitive)
            .residual(&Struct::from_iter(partition))
    }

    /// A file partitioned by identity(region) and day(day).
    fn narrowed(filter: Value, region: Option<&str>, case_sensitive: bool) -> Residual {
        let fields = [(2, Transform::Identity), (3, Transform::Day)];
        let partition = vec![region.map(Literal::string), Some(Literal::int(19_753))];
        under(&fields, partition, filter, case_sensitive)
    }

    fn eu(filter: Value) -> Residual {
        narrowed(filter, Some("eu"), true)
    }

    #[test]
    fn identity_partition_values_decide_their_comparisons() {
        let region =
            |kind: &str, value: &str| json!({"type": kind, "term": "region", "value": value});
        let id = json!({"type": "gt", "term": "id", "value": 5});
        assert_eq!(eu(region("eq", "eu")), Residual::True);
        assert_eq!(eu(region("eq", "us")), Residual::False);
        assert_eq!(eu(region("not-eq", "us")), Residual::True);
        assert_eq!(eu(region("lt", "fr")), Residual::True);
        assert_eq!(eu(region("gt-eq", "fr")), Residual::False);
        assert_eq!(eu(region("starts-with", "e")), Residual::True);
        assert_eq!(eu(region("not-starts-with", "e")), Residual::False);
        let among = |kind: &str| json!({"type": kind, "term": "region", "values": ["us", "eu"]});
        assert_eq!(eu(among("in")), Residual::True);
        assert_eq!(eu(among("not-in")), Residual::False);
        assert_eq!(
            eu(json!({"type": "is-null", "term": "region"})),
            Residual::False
        );
        assert_eq!(
            eu(json!({"type": "not-null", "term": "region"})),
            Residual::True
        );
        // What is decided drops out of `and`, `or` and `not`; the rest stays.
        let and = json!({"type": "and", "left": region("eq", "eu"), "right": id});
        assert_eq!(eu(and), Residual::Filter(id.clone()));
        let or = json!({"type": "or", "left": region("eq", "us"), "right": id});
        assert_eq!(eu(or), Residual::Filter(id.clone()));
        let not = json!({"type": "not", "child": {"type": "and", "left": id, "right": region("eq", "eu")}});
        assert_eq!(
            eu(not),
            Residual::Filter(json!({"type": "not", "child": id}))
        );
        assert_eq!(
            eu(json!({"type": "not", "child": region("eq", "eu")})),
            Residual::False
        );
        // Case-insensitive names find the column only when asked to.
        assert_eq!(
            narrowed(region("eq", "eu").tap_term("REGION"), Some("eu"), false),
            Residual::True
        );
        let upper = region("eq", "eu").tap_term("REGION");
        assert_eq!(
            narrowed(upper.clone(), Some("eu"), true),
            Residual::Filter(upper)
        );
    }

    #[test]
    fn what_the_values_cannot_decide_stays() {
        // Another column, a transform term the spec does not partition by, a null value,
        // an unreadable literal.
        let id = json!({"type": "eq", "term": "id", "value": 3});
        assert_eq!(eu(id.clone()), Residual::Filter(id));
        let bucket = json!({"type": "eq", "value": 1,
            "term": {"type": "transform", "transform": "bucket[4]", "term": "region"}});
        assert_eq!(eu(bucket.clone()), Residual::Filter(bucket));
        let eq = json!({"type": "eq", "term": "region", "value": "eu"});
        assert_eq!(narrowed(eq.clone(), None, true), Residual::Filter(eq));
        let null = json!({"type": "is-null", "term": "region"});
        assert_eq!(narrowed(null, None, true), Residual::True);
        let odd = json!({"type": "eq", "term": "region", "value": 7});
        assert_eq!(eu(odd.clone()), Residual::Filter(odd));
    }

    #[test]
    fn dates_convert_through_their_json_text() {
        let on = |value: Value| {
            let filter = json!({"type": "eq", "term": "day", "value": value});
            under(
                &[(3, Transform::Identity)],
                vec![Some(Literal::date(19_753))],
                filter,
                true,
            )
        };
        assert_eq!(on(json!("2024-01-31")), Residual::True);
        assert_eq!(on(json!(19_753)), Residual::True);
        assert_eq!(on(json!("2024-02-01")), Residual::False);
    }

    #[test]
    fn other_transforms_decide_through_their_projections() {
        // A file of day(ts) = 2024-01-31 (day 19,753): its rows lie within that day.
        let day = |filter: Value| {
            under(
                &[(4, Transform::Day)],
                vec![Some(Literal::date(19_753))],
                filter,
                true,
            )
        };
        let ts = |kind: &str, value: &str| json!({"type": kind, "term": "ts", "value": value});
        assert_eq!(day(ts("gt-eq", "2024-01-31T00:00:00")), Residual::True);
        assert_eq!(day(ts("lt", "2024-02-01T00:00:00")), Residual::True);
        assert_eq!(day(ts("lt", "2024-01-31T00:00:00")), Residual::False);
        assert_eq!(day(ts("gt", "2024-02-01T00:00:00")), Residual::False);
        assert_eq!(day(ts("eq", "2024-03-01T10:00:00")), Residual::False);
        assert_eq!(day(ts("not-null", "")), Residual::True);
        // Within the day, the rows must still be checked.
        let noon = ts("gt", "2024-01-31T12:00:00");
        assert_eq!(day(noon.clone()), Residual::Filter(noon));
        let range = json!({"type": "and", "left": ts("gt-eq", "2024-01-01T00:00:00"),
            "right": ts("lt", "2024-02-01T00:00:00")});
        assert_eq!(day(range), Residual::True);
        assert_eq!(
            day(json!({"type": "not", "child": ts("lt", "2024-01-31T00:00:00")})),
            Residual::True
        );

        // truncate(10, id) = 20: ids 20 to 29.
        let truncate = |filter: Value| {
            under(
                &[(1, Transform::Truncate(10))],
                vec![Some(Literal::long(20))],
                filter,
                true,
            )
        };
        let id = |kind: &str, value: i64| json!({"type": kind, "term": "id", "value": value});
        assert_eq!(truncate(id("gt-eq", 20)), Residual::True);
        assert_eq!(truncate(id("lt", 30)), Residual::True);
        assert_eq!(truncate(id("gt", 29)), Residual::False);
        assert_eq!(truncate(id("eq", 35)), Residual::False);
        assert_eq!(truncate(id("lt", 25)), Residual::Filter(id("lt", 25)));
        let among = json!({"type": "in", "term": "id", "values": [1, 2, 40]});
        assert_eq!(truncate(among), Residual::False);

        // bucket(4, id) = 1: an id's bucket rules it out, never in.
        let bucket = |filter: Value| {
            under(
                &[(1, Transform::Bucket(4))],
                vec![Some(Literal::int(1))],
                filter,
                true,
            )
        };
        let bucket4 = iceberg::transform::create_transform_function(&Transform::Bucket(4)).unwrap();
        let hashed_to = |id: i64| bucket4.transform_literal(&Datum::long(id));
        let other = (0..100)
            .find(|i| hashed_to(*i).unwrap() != Some(Datum::int(1)))
            .unwrap();
        let same = (0..100)
            .find(|i| hashed_to(*i).unwrap() == Some(Datum::int(1)))
            .unwrap();
        assert_eq!(bucket(id("eq", other)), Residual::False);
        assert_eq!(bucket(id("eq", same)), Residual::Filter(id("eq", same)));
    }

    #[test]
    fn non_ascii_prefixes_are_left_to_the_rows() {
        // truncate(4, region) = "éabc": its rows start with "éab", which iceberg-rust's
        // projections (bytes against characters) would get wrong either way.
        let file = |filter: Value| {
            under(
                &[(2, Transform::Truncate(4))],
                vec![Some(Literal::string("éabc"))],
                filter,
                true,
            )
        };
        for kind in ["starts-with", "not-starts-with"] {
            let prefix = json!({"type": kind, "term": "region", "value": "éab"});
            assert_eq!(file(prefix.clone()), Residual::Filter(prefix));
        }
        let ascii = json!({"type": "starts-with", "term": "region", "value": "x"});
        assert_eq!(file(ascii), Residual::False);
    }

    #[test]
    fn transform_terms_are_decided_by_the_same_transform() {
        let bucket = |kind: &str, value: i64| {
            json!({"type": kind, "value": value,
                "term": {"type": "transform", "transform": "bucket[4]", "term": "id"}})
        };
        let file = |filter: Value| {
            under(
                &[(1, Transform::Bucket(4)), (4, Transform::Day)],
                vec![Some(Literal::int(1)), None],
                filter,
                true,
            )
        };
        assert_eq!(file(bucket("eq", 1)), Residual::True);
        assert_eq!(file(bucket("eq", 2)), Residual::False);
        assert_eq!(file(bucket("not-eq", 2)), Residual::True);
        // Another width of bucket is another transform.
        let wider = json!({"type": "eq", "value": 1,
            "term": {"type": "transform", "transform": "bucket[8]", "term": "id"}});
        assert_eq!(file(wider.clone()), Residual::Filter(wider));
        // day(ts) with a null value: every row's ts is null.
        let day = |kind: &str| {
            json!({"type": kind, "value": "2024-01-31",
                "term": {"type": "transform", "transform": "day", "term": "ts"}})
        };
        let null = json!({"type": "is-null",
            "term": {"type": "transform", "transform": "day", "term": "ts"}});
        assert_eq!(file(null), Residual::True);
        assert_eq!(file(day("eq")), Residual::Filter(day("eq")));
        let not_null = json!({"type": "not-null", "term": "ts"});
        assert_eq!(file(not_null), Residual::False);
    }

    trait TapTerm {
        fn tap_term(self, term: &str) -> Value;
    }

    impl TapTerm for Value {
        fn tap_term(mut self, term: &str) -> Value {
            self["term"] = term.into();
            self
        }
    }
}
