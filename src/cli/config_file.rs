//! `floe serve --config FILE`: every setting of `floe serve` from one TOML file.
//!
//! Keys are the flags' long names (`bind = "0.0.0.0:8181"`, `events-sink = "nats://…"`,
//! `fsync = true`). **Precedence**: a flag on the command line, then its environment
//! variable, then the file, then the default. An unknown key, a nested table or a list
//! is an error that names the key, so a typo never silently falls back to a default.
//!
//! It works by turning the file into flags before clap parses the command line — only
//! those whose flag and environment variable are both absent — so clap's own parsing and
//! validation apply to file values exactly as to flags.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use anyhow::{bail, Context};
use clap::CommandFactory;

use super::Cli;

/// The command line with the config file's settings added, when `serve` names one
/// (`--config FILE`, `--config=FILE` or `FLOE_CONFIG`).
pub fn expand(args: Vec<OsString>) -> anyhow::Result<Vec<OsString>> {
    if args.get(1).and_then(|a| a.to_str()) != Some("serve") {
        return Ok(args);
    }
    let Some(path) = config_path(&args).or_else(|| std::env::var_os("FLOE_CONFIG")) else {
        return Ok(args);
    };
    let text = std::fs::read_to_string(Path::new(&path))
        .with_context(|| format!("reading the config file {}", Path::new(&path).display()))?;
    let settings = settings_from(&text, &|name| std::env::var_os(name).is_some(), &args)
        .with_context(|| format!("config file {}", Path::new(&path).display()))?;
    let mut args = args;
    args.extend(settings.into_iter().map(OsString::from));
    Ok(args)
}

fn config_path(args: &[OsString]) -> Option<OsString> {
    let mut iter = args.iter().skip(2);
    while let Some(arg) = iter.next() {
        let text = arg.to_string_lossy();
        if text == "--config" {
            return iter.next().cloned();
        }
        if let Some(path) = text.strip_prefix("--config=") {
            return Some(path.into());
        }
    }
    None
}

/// The flags (`--key=value`) the file adds: one per key whose flag is not on the command
/// line and whose environment variable is not set.
fn settings_from(
    text: &str,
    env_is_set: &dyn Fn(&str) -> bool,
    args: &[OsString],
) -> anyhow::Result<Vec<String>> {
    let table: toml::Table = text.parse().context("not valid TOML")?;
    let command = Cli::command();
    let serve = command
        .find_subcommand("serve")
        .expect("floe has a serve command");
    // Each flag: its environment variable, and whether it is a switch (`--insecure`,
    // which takes no value).
    let flags: BTreeMap<&str, (Option<String>, bool)> = serve
        .get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            let env = a.get_env().map(|e| e.to_string_lossy().into_owned());
            let switch = matches!(a.get_action(), clap::ArgAction::SetTrue);
            Some((long, (env, switch)))
        })
        .filter(|(long, _)| !matches!(*long, "config" | "help"))
        .collect();
    let given = |flag: &str| {
        args.iter().skip(2).any(|a| {
            let a = a.to_string_lossy();
            a == format!("--{flag}") || a.starts_with(&format!("--{flag}="))
        })
    };
    let mut out = Vec::new();
    for (key, value) in &table {
        let Some((env, switch)) = flags.get(key.as_str()) else {
            bail!(
                "unknown setting '{key}' (the settings are the flags of `floe serve`: {})",
                flags.keys().copied().collect::<Vec<_>>().join(", ")
            );
        };
        let value = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => bail!(
                "setting '{key}' must be a string, number or boolean, not a {}",
                other.type_str()
            ),
        };
        if given(key) || env.as_deref().is_some_and(env_is_set) {
            continue;
        }
        match (switch, value.as_str()) {
            (false, _) => out.push(format!("--{key}={value}")),
            (true, "true") => out.push(format!("--{key}")),
            (true, "false") => {}
            (true, other) => bail!("setting '{key}' is true or false, not {other}"),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn file_settings_become_flags_below_flags_and_environment() {
        let file = r#"
            bind = "0.0.0.0:9000"
            fsync = false
            db-pool-size = 20
            events-retention-days = 1.5
            log = "debug"
            insecure = true
            oidc-create-principals = false
        "#;
        let env_set = |name: &str| name == "FLOE_LOG";
        let cli = args(&[
            "floe",
            "serve",
            "--config",
            "f.toml",
            "--bind",
            "127.0.0.1:1",
        ]);
        let added = settings_from(file, &env_set, &cli).unwrap();
        assert_eq!(
            added,
            vec![
                "--db-pool-size=20",
                "--events-retention-days=1.5",
                "--fsync=false",
                "--insecure"
            ]
        );
        // And clap accepts what the file gave.
        let mut all = cli.clone();
        all.extend(added.into_iter().map(OsString::from));
        assert!(Cli::try_parse_from(all).is_ok());
    }

    #[test]
    fn unknown_keys_and_structures_are_errors() {
        let none = |_: &str| false;
        let cli = args(&["floe", "serve"]);
        let err = settings_from("bnd = \"x\"", &none, &cli).unwrap_err();
        assert!(err.to_string().contains("unknown setting 'bnd'"), "{err}");
        assert!(settings_from("config = \"x\"", &none, &cli).is_err());
        assert!(settings_from("[server]\nbind = \"x\"", &none, &cli).is_err());
        assert!(settings_from("bind = [1]", &none, &cli).is_err());
        assert!(settings_from("bind = ", &none, &cli).is_err());
    }

    #[test]
    fn the_path_comes_from_either_spelling() {
        let a = args(&["floe", "serve", "--config", "a.toml"]);
        assert_eq!(config_path(&a), Some("a.toml".into()));
        let b = args(&["floe", "serve", "--config=b.toml"]);
        assert_eq!(config_path(&b), Some("b.toml".into()));
        assert_eq!(config_path(&args(&["floe", "serve"])), None);
    }
}
