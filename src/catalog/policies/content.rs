//! Policy types and what their content may hold: Polaris's four predefined types (custom
//! types are refused, as Polaris refuses them), each with the JSON schema of its
//! 2025-02-03 version. The content is kept and returned exactly as sent; it is only
//! checked.
//!
//! Every type's content is an object with `enable` (a boolean, required), `version`
//! (`"2025-02-03"`, the default) and `config` (an object of strings, numbers and
//! booleans); orphan file removal also takes `max_orphan_file_age_in_days` (a number,
//! at least 0) and `locations` (strings). Nothing else.

use serde_json::Value;

/// The one schema version of the predefined types.
const VERSION: &str = "2025-02-03";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyType {
    DataCompaction,
    MetadataCompaction,
    OrphanFileRemoval,
    SnapshotExpiry,
}

impl PolicyType {
    pub const ALL: [PolicyType; 4] = [
        PolicyType::DataCompaction,
        PolicyType::MetadataCompaction,
        PolicyType::OrphanFileRemoval,
        PolicyType::SnapshotExpiry,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PolicyType::DataCompaction => "system.data-compaction",
            PolicyType::MetadataCompaction => "system.metadata-compaction",
            PolicyType::OrphanFileRemoval => "system.orphan-file-removal",
            PolicyType::SnapshotExpiry => "system.snapshot-expiry",
        }
    }

    /// Exactly as spelled (case and hyphens included), as Polaris matches it.
    pub fn parse(name: &str) -> Option<PolicyType> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Whether a policy of this type attached to a catalog or namespace applies to what
    /// is under it. All four predefined types are.
    pub fn inheritable(self) -> bool {
        true
    }

    /// Whether a stored type's name is that of an inheritable type.
    pub fn is_inheritable(name: &str) -> bool {
        Self::parse(name).is_some_and(Self::inheritable)
    }

    /// Checks a content for this type; the message says what is wrong.
    pub fn check(self, content: &str) -> Result<(), String> {
        if content.trim().is_empty() {
            return Err("Policy is empty: a policy needs a content".into());
        }
        let value: Value = serde_json::from_str(content)
            .map_err(|e| format!("Invalid policy: the content is not JSON ({e})"))?;
        let Value::Object(fields) = value else {
            return Err(format!(
                "Invalid policy: the content of a {} policy is a JSON object",
                self.name()
            ));
        };
        match fields.get("enable") {
            Some(Value::Bool(_)) => {}
            // Polaris reads `enable` with a deserializer of its own that takes the text of
            // the token: the strings "true" and "false" pass there, so a content written
            // for Polaris passes here too (and is kept as it was sent).
            Some(Value::String(s)) if s == "true" || s == "false" => {}
            Some(other) => return Err(format!("Invalid policy: enable is {other}, not a boolean")),
            None => return Err("Invalid policy: enable (a boolean) is required".into()),
        }
        for (key, value) in &fields {
            match key.as_str() {
                "enable" => {}
                "version" => match value {
                    Value::String(v) if v == VERSION => {}
                    other => {
                        return Err(format!(
                            "Invalid policy version: {other} (the only version is \"{VERSION}\")"
                        ))
                    }
                },
                "config" => check_config(value)?,
                "max_orphan_file_age_in_days" if self == PolicyType::OrphanFileRemoval => {
                    match value.as_f64() {
                        // An int in Polaris's model.
                        Some(days) if (0.0..=f64::from(i32::MAX)).contains(&days) => {}
                        _ => {
                            return Err(format!(
                                "Invalid max_orphan_file_age_in_days: {value}. It must be a number greater than or equal to 0"
                            ))
                        }
                    }
                }
                "locations" if self == PolicyType::OrphanFileRemoval => {
                    let strings = value
                        .as_array()
                        .is_some_and(|a| a.iter().all(Value::is_string));
                    if !strings {
                        return Err("Invalid policy: locations is an array of strings".into());
                    }
                }
                other => {
                    return Err(format!(
                        "Invalid policy: a {} policy has no field {other:?}",
                        self.name()
                    ))
                }
            }
        }
        Ok(())
    }
}

fn check_config(value: &Value) -> Result<(), String> {
    let Value::Object(config) = value else {
        return Err("Invalid policy: config is an object".into());
    };
    let scalar = |v: &Value| matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_));
    match config.iter().find(|(_, v)| !scalar(v)) {
        Some((key, v)) => Err(format!(
            "Invalid policy: config values are strings, numbers or booleans, not {v} ({key})"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_exactly_polaris_names() {
        for t in PolicyType::ALL {
            assert_eq!(PolicyType::parse(t.name()), Some(t));
            assert!(t.inheritable());
        }
        assert_eq!(PolicyType::parse("system.data_compaction"), None);
        assert_eq!(PolicyType::parse("SYSTEM.DATA-COMPACTION"), None);
        assert_eq!(PolicyType::parse("custom.mine"), None);
    }

    #[test]
    fn contents_as_polaris_checks_them() {
        let compaction = PolicyType::DataCompaction;
        for good in [
            r#"{"enable":true}"#,
            r#"{"enable":"false"}"#,
            r#"{"enable":false,"version":"2025-02-03","config":{"k":"v","n":3,"b":true}}"#,
        ] {
            compaction.check(good).unwrap();
        }
        for (bad, says) in [
            ("", "Policy is empty"),
            ("invalid", "not JSON"),
            ("null", "JSON object"),
            ("{}", "enable (a boolean) is required"),
            (r#"{"enable":null}"#, "not a boolean"),
            (r#"{"enable":"invalid"}"#, "not a boolean"),
            (r#"{"enable":"True"}"#, "not a boolean"),
            (r#"{"enable":1}"#, "not a boolean"),
            (
                r#"{"enable":true,"version":"fdafds"}"#,
                "Invalid policy version",
            ),
            (
                r#"{"enable":true,"invalid_key":1}"#,
                "no field \"invalid_key\"",
            ),
            (r#"{"enable":true,"config":{"k":{"x":1}}}"#, "config values"),
            (
                r#"{"enable":true,"locations":["s3://b/"]}"#,
                "no field \"locations\"",
            ),
        ] {
            let e = compaction.check(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let orphans = PolicyType::OrphanFileRemoval;
        orphans
            .check(r#"{"enable":true,"max_orphan_file_age_in_days":7,"locations":["s3://b/"]}"#)
            .unwrap();
        let e = orphans
            .check(r#"{"enable":true,"max_orphan_file_age_in_days":-3}"#)
            .unwrap_err();
        assert!(e.contains("greater than or equal to 0"), "{e}");
        assert!(orphans
            .check(r#"{"enable":true,"max_orphan_file_age_in_days":3000000000}"#)
            .is_err());
    }
}
