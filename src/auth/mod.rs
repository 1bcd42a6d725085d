//! Authentication and authorization, in Apache Polaris's model: principals hold principal
//! roles, principal roles hold catalog roles, catalog roles hold grants of privileges on
//! catalogs, namespaces, tables and views.
//!
//! - `privileges`: privilege names, implications and the pure allow/deny decision.
//! - `state`: the whole model as one versioned document (principals, roles, grants,
//!   signing keys), with its pure changes.
//! - `secrets`: client credentials, salted hashes, constant-time checks.
//! - `tokens`: the JWTs Floe issues and verifies.
//! - `oidc`: tokens of an external identity provider (OpenID Connect issuer, JWKS).
//!
//! Authentication happens in an HTTP layer (a token becomes a principal and its active
//! roles); authorization happens at the catalog's entry points, which see the resources.

pub mod oidc;
pub mod privileges;
pub mod secrets;
pub mod state;
pub mod tokens;
