//! Polaris's management API for principals, principal roles, catalog roles and grants
//! (`/api/management/v1/...`), with Polaris's request and response bodies.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::context::Ctx;
use super::error::{ApiError, ApiResult};
use super::extract::{JsonBody, OptionalJsonBody, Params};
use super::{AppState, Routes};
use crate::auth::privileges::{Grant, Privilege, Securable};
use crate::catalog::access::{principal_view, Entity, RoleView};
use crate::model::{Ident, Namespace, Properties};

pub fn routes(routes: Routes) -> Routes {
    routes
        .route("/principals", get(list_principals).post(create_principal))
        .route(
            "/principals/{p}",
            get(get_principal)
                .put(update_principal)
                .delete(drop_principal),
        )
        .route("/principals/{p}/rotate", post(rotate))
        .route("/signing-keys/rotate", post(rotate_signing_key))
        .route("/principals/{p}/reset", post(reset))
        .route(
            "/principals/{p}/principal-roles",
            get(roles_of_principal).put(assign_principal_role),
        )
        .route(
            "/principals/{p}/principal-roles/{r}",
            axum::routing::delete(revoke_principal_role),
        )
        .route(
            "/principal-roles",
            get(list_principal_roles).post(create_principal_role),
        )
        .route(
            "/principal-roles/{r}",
            get(get_principal_role)
                .put(update_principal_role)
                .delete(drop_principal_role),
        )
        .route("/principal-roles/{r}/principals", get(principals_holding))
        .route(
            "/principal-roles/{r}/catalog-roles/{c}",
            get(catalog_roles_of).put(assign_catalog_role),
        )
        .route(
            "/principal-roles/{r}/catalog-roles/{c}/{cr}",
            axum::routing::delete(revoke_catalog_role),
        )
        .route(
            "/catalogs/{c}/catalog-roles",
            get(list_catalog_roles).post(create_catalog_role),
        )
        .route(
            "/catalogs/{c}/catalog-roles/{cr}",
            get(get_catalog_role)
                .put(update_catalog_role)
                .delete(drop_catalog_role),
        )
        .route(
            "/catalogs/{c}/catalog-roles/{cr}/principal-roles",
            get(principal_roles_holding),
        )
        .route(
            "/catalogs/{c}/catalog-roles/{cr}/grants",
            get(list_grants).put(add_grant).post(revoke_grant),
        )
}

#[derive(Deserialize)]
struct Named {
    name: String,
    #[serde(default)]
    properties: Properties,
}

#[derive(Deserialize)]
struct CreatePrincipal {
    principal: Named,
}

async fn list_principals(State(s): State<AppState>, Ctx(ctx): Ctx) -> ApiResult<Json<Value>> {
    let list = s
        .catalog
        .security_view(&ctx, None, |st| {
            Ok(st
                .principals
                .values()
                .map(principal_view)
                .collect::<Vec<_>>())
        })
        .await?;
    Ok(Json(json!({ "principals": list })))
}

async fn create_principal(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    JsonBody(body): JsonBody<CreatePrincipal>,
) -> ApiResult<Response> {
    let created = s
        .catalog
        .create_principal(&ctx, &body.principal.name, body.principal.properties)
        .await?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

async fn get_principal(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path(p): Path<String>,
) -> ApiResult<Json<Value>> {
    let view = s
        .catalog
        .security_view(&ctx, None, |st| {
            st.principals
                .get(&p)
                .map(principal_view)
                .ok_or_else(|| missing("Principal", &p))
        })
        .await?;
    Ok(Json(view))
}

async fn drop_principal(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path(p): Path<String>,
) -> ApiResult<StatusCode> {
    s.catalog.drop_principal(&ctx, &p).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn rotate(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path(p): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(s.catalog.new_principal_secret(&ctx, &p, true).await?))
}

/// Polaris's `ResetPrincipalRequest`: the credentials a caller would have set.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResetRequest {
    client_id: Option<String>,
    client_secret: Option<String>,
}

/// Floe makes the new credentials itself, as Polaris does unless it is configured to take
/// the caller's: a request naming its own is refused (before anything changes), not
/// answered with credentials it did not ask for. The body is optional.
async fn reset(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path(p): Path<String>,
    OptionalJsonBody(body): OptionalJsonBody<ResetRequest>,
) -> ApiResult<Json<Value>> {
    if body.is_some_and(|b| b.client_id.is_some() || b.client_secret.is_some()) {
        return Err(ApiError::bad_request(
            "This server makes a principal's new credentials itself: a reset takes no clientId or clientSecret (send no body, or {})",
        ));
    }
    Ok(Json(s.catalog.new_principal_secret(&ctx, &p, false).await?))
}

fn missing(what: &str, name: &str) -> crate::catalog::error::CatalogError {
    crate::catalog::error::CatalogError::not_found(
        crate::catalog::error::Missing::Catalog,
        format!("{what} {name} does not exist"),
    )
}

async fn roles_of_principal(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path(p): Path<String>,
) -> ApiResult<Json<Value>> {
    let roles = s
        .catalog
        .security_view(&ctx, None, |st| {
            let principal = st
                .principals
                .get(&p)
                .ok_or_else(|| missing("Principal", &p))?;
            Ok(principal
                .principal_roles
                .iter()
                .filter_map(|r| st.principal_roles.get(r))
                .map(|r| r.view())
                .collect::<Vec<_>>())
        })
        .await?;
    Ok(Json(json!({ "roles": roles })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GrantPrincipalRole {
    principal_role: Named,
}

async fn assign_principal_role(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path(p): Path<String>,
    JsonBody(body): JsonBody<GrantPrincipalRole>,
) -> ApiResult<StatusCode> {
    s.catalog
        .assign_principal_role(&ctx, &p, &body.principal_role.name, true)
        .await?;
    Ok(StatusCode::CREATED)
}

async fn revoke_principal_role(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path((p, r)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    s.catalog.assign_principal_role(&ctx, &p, &r, false).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreatePrincipalRole {
    principal_role: Named,
}

async fn list_principal_roles(State(s): State<AppState>, Ctx(ctx): Ctx) -> ApiResult<Json<Value>> {
    let roles = s
        .catalog
        .security_view(&ctx, None, |st| {
            Ok(st
                .principal_roles
                .values()
                .map(|r| r.view())
                .collect::<Vec<_>>())
        })
        .await?;
    Ok(Json(json!({ "roles": roles })))
}

async fn create_principal_role(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    JsonBody(body): JsonBody<CreatePrincipalRole>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    s.catalog
        .create_principal_role(
            &ctx,
            &body.principal_role.name,
            body.principal_role.properties,
        )
        .await
        .map(|view| (StatusCode::CREATED, Json(view)))
        .map_err(Into::into)
}

async fn get_principal_role(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path(r): Path<String>,
) -> ApiResult<Json<Value>> {
    let view = s
        .catalog
        .security_view(&ctx, None, |st| {
            st.principal_roles
                .get(&r)
                .map(|r| r.view())
                .ok_or_else(|| missing("Principal role", &r))
        })
        .await?;
    Ok(Json(view))
}

async fn drop_principal_role(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path(r): Path<String>,
) -> ApiResult<StatusCode> {
    s.catalog.drop_principal_role(&ctx, &r).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn catalog_roles_of(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path((r, c)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let roles = s
        .catalog
        .security_view(&ctx, Some(&c), |st| {
            let role = st
                .principal_roles
                .get(&r)
                .ok_or_else(|| missing("Principal role", &r))?;
            Ok(role
                .catalog_roles
                .iter()
                .filter(|(catalog, _)| *catalog == c)
                .filter_map(|(_, name)| st.catalog_roles.get(&c)?.get(name))
                .map(|cr| cr.view())
                .collect::<Vec<_>>())
        })
        .await?;
    Ok(Json(json!({ "roles": roles })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CatalogRoleBody {
    catalog_role: Named,
}

async fn assign_catalog_role(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path((r, c)): Path<(String, String)>,
    JsonBody(body): JsonBody<CatalogRoleBody>,
) -> ApiResult<StatusCode> {
    s.catalog
        .assign_catalog_role(&ctx, &r, &c, &body.catalog_role.name, true)
        .await?;
    Ok(StatusCode::CREATED)
}

async fn revoke_catalog_role(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path((r, c, cr)): Path<(String, String, String)>,
) -> ApiResult<StatusCode> {
    s.catalog
        .assign_catalog_role(&ctx, &r, &c, &cr, false)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_catalog_roles(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path(c): Path<String>,
) -> ApiResult<Json<Value>> {
    let roles = s
        .catalog
        .security_view(&ctx, Some(&c), |st| {
            Ok(st
                .catalog_roles
                .get(&c)
                .map(|roles| roles.values().map(|cr| cr.view()).collect::<Vec<_>>())
                .unwrap_or_default())
        })
        .await?;
    Ok(Json(json!({ "roles": roles })))
}

async fn create_catalog_role(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path(c): Path<String>,
    JsonBody(body): JsonBody<CatalogRoleBody>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    s.catalog
        .create_catalog_role(
            &ctx,
            &c,
            &body.catalog_role.name,
            body.catalog_role.properties,
        )
        .await
        .map(|view| (StatusCode::CREATED, Json(view)))
        .map_err(Into::into)
}

async fn get_catalog_role(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path((c, cr)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let view = s
        .catalog
        .security_view(&ctx, Some(&c), |st| {
            st.catalog_roles
                .get(&c)
                .and_then(|roles| roles.get(&cr))
                .map(|r| r.view())
                .ok_or_else(|| missing("Catalog role", &cr))
        })
        .await?;
    Ok(Json(view))
}

async fn drop_catalog_role(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path((c, cr)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    s.catalog.drop_catalog_role(&ctx, &c, &cr).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Polaris's `GrantResource`: `{"type": "table", "namespace": [...], "tableName": ...,
/// "privilege": ...}` and its siblings.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GrantBody {
    #[serde(rename = "type")]
    kind: String,
    privilege: String,
    #[serde(default)]
    namespace: Option<Vec<String>>,
    table_name: Option<String>,
    view_name: Option<String>,
    policy_name: Option<String>,
}

#[derive(Deserialize)]
struct AddGrant {
    grant: GrantBody,
}

fn parse_grant(body: GrantBody) -> ApiResult<Grant> {
    let privilege = Privilege::parse(&body.privilege)
        .ok_or_else(|| ApiError::bad_request(format!("Unknown privilege {}", body.privilege)))?;
    let namespace = |ns: Option<Vec<String>>| -> ApiResult<Namespace> {
        Ok(Namespace::new(ns.ok_or_else(|| {
            ApiError::bad_request("namespace is required")
        })?)?)
    };
    let securable = match body.kind.as_str() {
        "catalog" => Securable::Catalog,
        "namespace" => Securable::namespace(&namespace(body.namespace)?),
        "table" => {
            let name = body
                .table_name
                .ok_or_else(|| ApiError::bad_request("tableName is required"))?;
            Securable::table(&Ident::new(namespace(body.namespace)?, name)?)
        }
        "view" => {
            let name = body
                .view_name
                .ok_or_else(|| ApiError::bad_request("viewName is required"))?;
            Securable::view(&Ident::new(namespace(body.namespace)?, name)?)
        }
        "policy" => {
            let name = body
                .policy_name
                .ok_or_else(|| ApiError::bad_request("policyName is required"))?;
            Securable::policy(&namespace(body.namespace)?, &name)
        }
        other => return Err(ApiError::bad_request(format!("Unknown grant type {other}"))),
    };
    Ok(Grant {
        securable,
        privilege,
    })
}

fn grant_view(g: &Grant) -> Value {
    let privilege = g.privilege.as_str();
    match &g.securable {
        Securable::Catalog => json!({ "type": "catalog", "privilege": privilege }),
        Securable::Namespace { namespace } => {
            json!({ "type": "namespace", "namespace": namespace, "privilege": privilege })
        }
        Securable::Table { namespace, name } => json!({
            "type": "table", "namespace": namespace, "tableName": name, "privilege": privilege,
        }),
        Securable::View { namespace, name } => json!({
            "type": "view", "namespace": namespace, "viewName": name, "privilege": privilege,
        }),
        Securable::Policy { namespace, name } => json!({
            "type": "policy", "namespace": namespace, "policyName": name, "privilege": privilege,
        }),
    }
}

async fn list_grants(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path((c, cr)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let grants = s
        .catalog
        .security_view(&ctx, Some(&c), |st| {
            let role = st
                .catalog_roles
                .get(&c)
                .and_then(|roles| roles.get(&cr))
                .ok_or_else(|| missing("Catalog role", &cr))?;
            Ok(role.grants.iter().map(grant_view).collect::<Vec<_>>())
        })
        .await?;
    Ok(Json(json!({ "grants": grants })))
}

async fn add_grant(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path((c, cr)): Path<(String, String)>,
    JsonBody(body): JsonBody<AddGrant>,
) -> ApiResult<StatusCode> {
    let grant = parse_grant(body.grant)?;
    s.catalog.change_grant(&ctx, &c, &cr, grant, true).await?;
    Ok(StatusCode::CREATED)
}

/// Polaris revokes with `POST .../grants` and the grant in the body.
async fn revoke_grant(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path((c, cr)): Path<(String, String)>,
    JsonBody(body): JsonBody<AddGrant>,
) -> ApiResult<StatusCode> {
    let grant = parse_grant(body.grant)?;
    s.catalog.change_grant(&ctx, &c, &cr, grant, false).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Polaris's `Update*Request`: the version the caller saw and the new properties.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UpdateProperties {
    current_entity_version: i64,
    properties: Properties,
}

async fn update(
    s: &AppState,
    ctx: &crate::catalog::RequestContext,
    entity: Entity<'_>,
    body: UpdateProperties,
) -> ApiResult<Json<Value>> {
    let view = s
        .catalog
        .update_properties(ctx, entity, body.current_entity_version, body.properties)
        .await?;
    Ok(Json(view))
}

async fn update_principal(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path(p): Path<String>,
    JsonBody(body): JsonBody<UpdateProperties>,
) -> ApiResult<Json<Value>> {
    update(&s, &ctx, Entity::Principal(&p), body).await
}

async fn update_principal_role(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path(r): Path<String>,
    JsonBody(body): JsonBody<UpdateProperties>,
) -> ApiResult<Json<Value>> {
    update(&s, &ctx, Entity::PrincipalRole(&r), body).await
}

async fn update_catalog_role(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path((c, cr)): Path<(String, String)>,
    JsonBody(body): JsonBody<UpdateProperties>,
) -> ApiResult<Json<Value>> {
    let entity = Entity::CatalogRole {
        catalog: &c,
        name: &cr,
    };
    update(&s, &ctx, entity, body).await
}

/// `GET /principal-roles/{r}/principals`: the principals holding a principal role.
async fn principals_holding(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path(r): Path<String>,
) -> ApiResult<Json<Value>> {
    let list = s
        .catalog
        .security_view(&ctx, None, |st| {
            if !st.principal_roles.contains_key(&r) {
                return Err(missing("Principal role", &r));
            }
            Ok(st
                .principals
                .values()
                .filter(|p| p.principal_roles.contains(&r))
                .map(principal_view)
                .collect::<Vec<_>>())
        })
        .await?;
    Ok(Json(json!({ "principals": list })))
}

/// `GET /catalogs/{c}/catalog-roles/{cr}/principal-roles`: the principal roles holding
/// a catalog role.
async fn principal_roles_holding(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    Path((c, cr)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let list = s
        .catalog
        .security_view(&ctx, Some(&c), |st| {
            if st.catalog_roles.get(&c).and_then(|r| r.get(&cr)).is_none() {
                return Err(missing("Catalog role", &cr));
            }
            let held = (c.clone(), cr.clone());
            Ok(st
                .principal_roles
                .values()
                .filter(|r| r.catalog_roles.contains(&held))
                .map(|r| r.view())
                .collect::<Vec<_>>())
        })
        .await?;
    Ok(Json(json!({ "roles": list })))
}

/// `POST /api/management/v1/signing-keys/rotate` (Floe's own): new tokens are signed
/// with a new key; tokens already issued keep working until they expire, unless
/// `?retirePrevious=true` (a key leaked): then every token issued so far stops working.
async fn rotate_signing_key(
    State(s): State<AppState>,
    Ctx(ctx): Ctx,
    params: Params,
) -> ApiResult<Json<Value>> {
    let retire = params.flag("retirePrevious")?;
    let lifetime = s.auth.token_lifetime;
    let body = s.catalog.rotate_signing_key(&ctx, lifetime, retire).await?;
    Ok(Json(body))
}
