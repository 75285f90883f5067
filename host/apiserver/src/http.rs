//! The HTTP API: one fallback handler parses the path (resources are dynamic),
//! authenticates, and dispatches to discovery, CRUD, patch, apply and watch.

use crate::builtins::Verbs;
use crate::discovery;
use crate::error::{ApiResult, StatusError};
use crate::openapi;
use crate::patch::{self, PatchType};
use crate::protobuf;
use crate::rbac::{self, UserInfo};
use crate::review;
use crate::scale;
use crate::store::{
    DeleteOptions, Deleted, ListOptions, Ownership, Propagation, Store, Target, WatchFrom,
};
use crate::table::{self, Output};
use crate::watch::{self, WatchRequest};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use http::{HeaderMap, Method, StatusCode, header};
use kubewasm_core::selector::{FieldSelector, LabelSelector, OBJECT_META_FIELDS};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Shared state of the HTTP handler.
pub(crate) struct App {
    /// The store.
    pub(crate) store: Arc<Store>,
    /// Required bearer token.
    pub(crate) token: Option<String>,
    /// Authorize requests with the stored RBAC objects ([`crate::rbac`]).
    pub(crate) rbac: bool,
    /// Other tokens and the users they authenticate as.
    pub(crate) users: Vec<(String, crate::rbac::UserInfo)>,
    /// Watch bookmark period.
    pub(crate) bookmark_interval: Duration,
    /// How `sendInitialEvents` is treated (changed by [`crate::ApiServer::set_watch_list`]).
    pub(crate) watch_list: Arc<std::sync::Mutex<watch::WatchList>>,
    /// `host:port` the server listens on.
    pub(crate) server_address: String,
    /// Flips to true on shutdown; ends watches.
    pub(crate) shutdown: tokio::sync::watch::Receiver<bool>,
    /// True during a simulated watch outage ([`crate::ApiServer::pause_watches`]).
    pub(crate) outage: tokio::sync::watch::Receiver<bool>,
    /// Clients whose requests are held, and the request log ([`crate::stall`]).
    pub(crate) stalls: Arc<crate::stall::Stalls>,
}

/// The axum router.
pub(crate) fn router(app: Arc<App>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(app)
}

const MAX_BODY: usize = 16 * 1024 * 1024;

fn json_response(code: u16, v: &Value) -> Response {
    json_response_typed(code, v, "application/json")
}

fn json_response_typed(code: u16, v: &Value, content_type: &str) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_default();
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(body))
        .unwrap_or_default()
}

fn bytes_response(code: u16, body: Vec<u8>, content_type: &str) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(body))
        .unwrap_or_default()
}

fn status_response(e: &StatusError) -> Response {
    json_response(e.code, &e.to_status())
}

/// The error Status in the media type the client takes (protobuf when it takes only that).
fn status_response_for(e: &StatusError, accept: &str) -> Response {
    if protobuf::accept_only_protobuf(accept)
        && let Ok(body) = protobuf::encode(&e.to_status())
    {
        return bytes_response(e.code, body, protobuf::MEDIA_TYPE);
    }
    status_response(e)
}

/// 406: the client accepts only media types this resource cannot be served in.
fn not_acceptable(builtin: bool) -> StatusError {
    let types = if builtin {
        "application/json, application/yaml, application/vnd.kubernetes.protobuf"
    } else {
        "application/json, application/yaml"
    };
    StatusError::new(
        406,
        "NotAcceptable",
        format!("only the following media types are accepted: {types}"),
    )
}

/// A successful answer: JSON, or protobuf for a client that accepts only protobuf
/// (as kube-apiserver, which serves built-in kinds in both; custom resources and
/// tables have no protobuf form here and get 406 then).
fn reply(code: u16, v: &Value, accept: &str, t: &Target) -> ApiResult<Response> {
    if !protobuf::accept_only_protobuf(accept) {
        return Ok(json_response(code, v));
    }
    if !t.info.builtin {
        return Err(not_acceptable(false));
    }
    match protobuf::encode(v) {
        Ok(body) => Ok(bytes_response(code, body, protobuf::MEDIA_TYPE)),
        Err(protobuf::ProtoError::UnknownKind { .. }) => Err(not_acceptable(true)),
        Err(e) => Err(StatusError::internal(format!(
            "encoding the response as protobuf failed: {e}"
        ))),
    }
}

async fn handle(State(app): State<Arc<App>>, req: Request) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let accept = header_str(req.headers(), header::ACCEPT).to_string();
    // A stalled client's request waits here, unanswered (test hook).
    app.stalls
        .enter(req.headers(), &method, &req.uri().to_string())
        .await;
    let result = dispatch(&app, req).await;
    match result {
        Ok(r) => {
            tracing::debug!(%method, %path, status = r.status().as_u16(), "request");
            r
        }
        Err(e) => {
            tracing::debug!(%method, %path, status = e.code, reason = %e.reason, message = %e.message, "request failed");
            status_response_for(&e, &accept)
        }
    }
}

/// The query's parameters, decoded, in order (a key may repeat).
fn query_pairs(q: Option<&str>) -> impl Iterator<Item = (String, String)> + '_ {
    let dec = |s: &str| {
        percent_encoding::percent_decode_str(&s.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned()
    };
    q.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(move |pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (dec(k), dec(v))
        })
}

/// The query's parameters by key; a repeated key keeps its last value.
fn parse_query(q: Option<&str>) -> HashMap<String, String> {
    query_pairs(q).collect()
}

/// Every value of a repeatable parameter (`dryRun=All&dryRun=All`).
fn query_values(q: Option<&str>, key: &str) -> Vec<String> {
    query_pairs(q)
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v)
        .collect()
}

/// Whether the write is a dry run, from its options' `dryRun` values: none means no,
/// `All` (any number of times) yes; anything else (`Foo`, `all`, an empty value) is
/// refused as kube-apiserver's `ValidateDryRun` refuses it, naming the options kind
/// (`CreateOptions`, `UpdateOptions`, `PatchOptions`, `DeleteOptions`).
fn dry_run(values: &[String], options_kind: &str) -> ApiResult<bool> {
    if values.iter().all(|v| v == "All") {
        return Ok(!values.is_empty());
    }
    let listed = serde_json::to_string(values).unwrap_or_default();
    Err(StatusError::invalid(
        "meta.k8s.io",
        options_kind,
        "",
        vec![(
            "FieldValueNotSupported".into(),
            "dryRun".into(),
            format!("Unsupported value: {listed}: supported values: \"All\""),
        )],
    ))
}

fn header_str(h: &HeaderMap, name: header::HeaderName) -> &str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

fn truthy(q: &HashMap<String, String>, k: &str) -> bool {
    watch::query_bool(q, k).unwrap_or(false)
}

/// Who sent the request: None when the token is wrong. Without a required token every
/// request is the admin.
fn authenticate(app: &App, headers: &HeaderMap) -> Option<UserInfo> {
    let admin = || UserInfo::new("kubewasm:admin", &["system:masters"]);
    let bearer = header_str(headers, header::AUTHORIZATION)
        .strip_prefix("Bearer ")
        .map(str::trim);
    if let Some(user) = bearer.and_then(|t| known_token(app, t)) {
        return Some(user);
    }
    match &app.token {
        None => Some(admin()),
        Some(token) => (bearer == Some(token.as_str())).then(admin),
    }
}

/// Whom `token` authenticates as, among the tokens this server was given (the admin
/// token, each user's); None for any other, even where no token is required: what a
/// TokenReview answers.
fn known_token(app: &App, token: &str) -> Option<UserInfo> {
    if let Some((_, user)) = app.users.iter().find(|(t, _)| t == token) {
        return Some(user.clone());
    }
    (app.token.as_deref() == Some(token))
        .then(|| UserInfo::new("kubewasm:admin", &["system:masters"]))
}

/// With RBAC on: the user the request acts as, after impersonation (checked).
fn acting_user(app: &App, headers: &HeaderMap, caller: UserInfo) -> ApiResult<UserInfo> {
    let user = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok());
    let groups: Vec<String> = headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_string)
        .collect();
    Ok(rbac::impersonate(&app.store, &caller, user, &groups)?.unwrap_or(caller))
}

/// With RBAC on: whether `user` may make this resource request.
fn authorize_resource(
    app: &App,
    user: &UserInfo,
    method: &Method,
    group: &str,
    rp: &ResourcePath,
    watch: bool,
) -> ApiResult<()> {
    let a = rbac::Attributes {
        verb: rbac::verb(method, rp.name.is_some(), watch).to_string(),
        group: group.to_string(),
        resource: rp.plural.clone(),
        subresource: rp.subresource.clone(),
        namespace: rp.namespace.clone(),
        name: rp.name.clone(),
    };
    if rbac::allowed(&app.store, user, &a) {
        Ok(())
    } else {
        Err(rbac::forbidden(user, &a))
    }
}

async fn dispatch(app: &Arc<App>, req: Request) -> ApiResult<Response> {
    let Some(caller) = authenticate(app, req.headers()) else {
        return Err(StatusError::unauthorized());
    };
    // Without RBAC, impersonation headers are ignored as before (everyone is admin).
    let user = if app.rbac {
        Some(acting_user(app, req.headers(), caller)?)
    } else {
        None
    };
    let path = req.uri().path().to_string();
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let accept = header_str(req.headers(), header::ACCEPT).to_string();
    let get = req.method() == Method::GET;
    match segs.as_slice() {
        ["healthz" | "livez" | "readyz", ..] if get => Ok(Response::builder()
            .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(Body::from("ok"))
            .unwrap_or_default()),
        ["version"] if get => Ok(json_response(200, &discovery::version())),
        ["api"] if get => {
            if discovery::wants_aggregated(&accept) {
                let reg = app.store.registry();
                Ok(json_response_typed(
                    200,
                    &discovery::aggregated(&reg, true),
                    discovery::AGGREGATED_CONTENT_TYPE,
                ))
            } else {
                Ok(json_response(
                    200,
                    &discovery::core_versions(&app.server_address),
                ))
            }
        }
        ["apis"] if get => {
            let reg = app.store.registry();
            if discovery::wants_aggregated(&accept) {
                Ok(json_response_typed(
                    200,
                    &discovery::aggregated(&reg, false),
                    discovery::AGGREGATED_CONTENT_TYPE,
                ))
            } else {
                Ok(json_response(200, &discovery::group_list(&reg)))
            }
        }
        ["openapi", "v2"] if get => {
            let reg = app.store.registry();
            if accept.contains("protobuf") {
                Ok(bytes_response(
                    200,
                    openapi::v2_protobuf(&reg),
                    openapi::V2_PROTOBUF,
                ))
            } else {
                Ok(json_response(200, &openapi::v2(&reg)))
            }
        }
        ["openapi", "v3"] if get => Ok(json_response(
            200,
            &openapi::v3_index(&app.store.registry()),
        )),
        ["openapi", "v3", rest @ ..] if get => openapi::v3_document(&app.store.registry(), rest)
            .map(|d| json_response(200, &d))
            .ok_or_else(StatusError::no_route),
        ["api", v] if get => discovery::resource_list(&app.store.registry(), "", v)
            .map(|d| json_response(200, &d))
            .ok_or_else(StatusError::no_route),
        ["apis", g] if get => discovery::group(&app.store.registry(), g)
            .map(|d| json_response(200, &d))
            .ok_or_else(StatusError::no_route),
        ["apis", g, v] if get => discovery::resource_list(&app.store.registry(), g, v)
            .map(|d| json_response(200, &d))
            .ok_or_else(StatusError::no_route),
        ["api", v, rest @ ..] if !rest.is_empty() => {
            let (v, rest) = (v.to_string(), owned(rest));
            resource(app, req, String::new(), v, rest, user.as_ref()).await
        }
        // Not stored: answered for the caller (any authenticated user may ask).
        [
            "apis",
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
        ] => {
            let review = review_body(req).await?;
            let answer = review::self_subject_access_review(&app.store, user.as_ref(), review)?;
            Ok(json_response(201, &answer))
        }
        ["apis", "authorization.k8s.io", "v1", "subjectaccessreviews"] => {
            let review = review_body(req).await?;
            let answer = review::subject_access_review(&app.store, user.as_ref(), review)?;
            Ok(json_response(201, &answer))
        }
        ["apis", "authentication.k8s.io", "v1", "tokenreviews"] => {
            let review = review_body(req).await?;
            let lookup = |t: &str| known_token(app, t);
            let answer = review::token_review(&app.store, user.as_ref(), lookup, review)?;
            Ok(json_response(201, &answer))
        }
        ["apis", "authentication.k8s.io", "v1", "selfsubjectreviews"] => {
            if req.method() != Method::POST {
                return Err(StatusError::method_not_allowed());
            }
            Ok(json_response(
                201,
                &review::self_subject_review(user.as_ref()),
            ))
        }
        ["apis", g, v, rest @ ..] if !rest.is_empty() => {
            let (g, v, rest) = (g.to_string(), v.to_string(), owned(rest));
            resource(app, req, g, v, rest, user.as_ref()).await
        }
        _ => Err(StatusError::no_route()),
    }
}

/// The body of a review (created only, stored nowhere): POST alone, JSON or YAML.
async fn review_body(req: Request) -> ApiResult<Value> {
    if req.method() != Method::POST {
        return Err(StatusError::method_not_allowed());
    }
    let body = axum::body::to_bytes(req.into_body(), MAX_BODY)
        .await
        .map_err(|e| StatusError::bad_request(format!("reading the request body failed: {e}")))?;
    patch::parse_body(&body, true)
}

fn owned(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| x.to_string()).collect()
}

struct ResourcePath {
    namespace: Option<String>,
    plural: String,
    name: Option<String>,
    subresource: Option<String>,
}

fn parse_resource_path(group: &str, rest: &[String]) -> Option<ResourcePath> {
    let is_ns_sub = |s: &str| matches!(s, "status" | "finalize");
    if rest.first().map(String::as_str) == Some("namespaces")
        && rest.len() >= 3
        && !(group.is_empty() && rest.len() == 3 && is_ns_sub(&rest[2]))
    {
        if rest.len() > 5 {
            return None;
        }
        return Some(ResourcePath {
            namespace: Some(rest[1].clone()),
            plural: rest[2].clone(),
            name: rest.get(3).cloned(),
            subresource: rest.get(4).cloned(),
        });
    }
    if rest.len() > 3 {
        return None;
    }
    Some(ResourcePath {
        namespace: None,
        plural: rest[0].clone(),
        name: rest.get(1).cloned(),
        subresource: rest.get(2).cloned(),
    })
}

fn manager_name(q: &HashMap<String, String>, headers: &HeaderMap) -> String {
    match q.get("fieldManager").filter(|m| !m.is_empty()) {
        Some(m) => m.clone(),
        None => {
            let ua = header_str(headers, header::USER_AGENT);
            ua.split('/')
                .next()
                .unwrap_or("")
                .chars()
                .take(128)
                .collect()
        }
    }
}

/// Selectors parsed by the one implementation kubewasm has (`kubewasm-core`). Custom
/// resources support only the ObjectMeta fields, as on kube-apiserver (built-in kinds
/// have field sets of their own, approximated here by any field path).
fn list_options(q: &HashMap<String, String>, builtin: bool) -> ApiResult<ListOptions> {
    let label_text = q.get("labelSelector").map(String::as_str).unwrap_or("");
    let field_text = q.get("fieldSelector").map(String::as_str).unwrap_or("");
    let labels = LabelSelector::parse(label_text)
        .map_err(|e| StatusError::bad_request(format!("unable to parse requirement: {e}")))?;
    let fields = if builtin {
        FieldSelector::parse(field_text)
    } else {
        FieldSelector::parse_restricted(field_text, OBJECT_META_FIELDS)
    }
    .map_err(|e| match e {
        kubewasm_core::selector::SelectorError::UnsupportedField(_) => {
            StatusError::bad_request(e.to_string())
        }
        e => StatusError::bad_request(format!("invalid selector: '{field_text}'; {e}")),
    })?;
    Ok(ListOptions {
        labels,
        fields,
        limit: q.get("limit").and_then(|l| l.parse().ok()),
        continue_token: q.get("continue").filter(|c| !c.is_empty()).cloned(),
    })
}

/// The options kind a write's query parameters decode into (DELETE's come from its
/// body as well: [`delete_options`]).
fn write_options_kind(method: &Method) -> Option<&'static str> {
    match *method {
        Method::POST => Some("CreateOptions"),
        Method::PUT => Some("UpdateOptions"),
        Method::PATCH => Some("PatchOptions"),
        _ => None,
    }
}

/// DeleteOptions from the body when there is one, else from the query: kube-apiserver
/// reads one or the other, never both (beside a body, `?dryRun=All` is ignored and the
/// delete is real). With whether `orphanDependents: false` was asked, which makes a
/// deletion left pending answer 202.
fn delete_options(query: Option<&str>, body: &[u8]) -> ApiResult<(DeleteOptions, bool)> {
    let b: Value = if body.iter().all(u8::is_ascii_whitespace) {
        delete_options_from_query(query)
    } else {
        patch::parse_body(body, true)?
    };
    let orphan = b.get("orphanDependents").and_then(Value::as_bool);
    let propagation = match b.get("propagationPolicy").and_then(Value::as_str) {
        Some("Background") => Some(Propagation::Background),
        Some("Foreground") => Some(Propagation::Foreground),
        Some("Orphan") => Some(Propagation::Orphan),
        Some(other) => {
            return Err(StatusError::new(
                422,
                "Invalid",
                format!(
                    "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
                ),
            ));
        }
        None => match orphan {
            Some(true) => Some(Propagation::Orphan),
            Some(false) => Some(Propagation::Background),
            None => None,
        },
    };
    let dry_run_values = match b.get("dryRun") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map(String::from))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                StatusError::bad_request("DeleteOptions.dryRun must be a list of strings")
            })?,
        Some(_) => {
            return Err(StatusError::bad_request(
                "DeleteOptions.dryRun must be a list of strings",
            ));
        }
    };
    let pre = b.get("preconditions");
    let precondition = |k: &str| {
        pre.and_then(|p| p.get(k))
            .and_then(Value::as_str)
            .map(String::from)
    };
    let opts = DeleteOptions {
        propagation,
        uid: precondition("uid"),
        resource_version: precondition("resourceVersion"),
        dry_run: dry_run(&dry_run_values, "DeleteOptions")?,
    };
    Ok((opts, orphan == Some(false)))
}

/// The DeleteOptions a query carries, in the body's form (preconditions have no query
/// form).
fn delete_options_from_query(query: Option<&str>) -> Value {
    let q = parse_query(query);
    let mut b = json!({"dryRun": query_values(query, "dryRun")});
    if let Some(p) = q.get("propagationPolicy") {
        b["propagationPolicy"] = json!(p);
    }
    if let Some(o) = q.get("orphanDependents") {
        b["orphanDependents"] = json!(o == "true");
    }
    b
}

/// Resources whose DELETE answers the object even once it is gone (`ReturnDeletedObject`
/// in their kube-apiserver registry: namespaces, pods, services, ... see `builtins`).
fn returns_deleted_object(t: &Target) -> bool {
    t.info.returns_deleted
}

/// What a DELETE answers, as kube-apiserver: an object left pending (finalizers) is
/// answered as marked, with 202 when `orphanDependents: false` was asked; one gone is
/// answered by a Success Status naming it (kind = the resource, as there), except for
/// the resources that return the deleted object.
fn delete_answer(t: &Target, d: Deleted, orphan_false: bool) -> (u16, Value) {
    if !d.gone {
        return (if orphan_false { 202 } else { 200 }, d.object);
    }
    if returns_deleted_object(t) {
        return (200, d.object);
    }
    let mut details = serde_json::Map::new();
    if let Some(name) = d.object.pointer("/metadata/name") {
        details.insert("name".into(), name.clone());
    }
    if !t.info.group.is_empty() {
        details.insert("group".into(), json!(t.info.group));
    }
    details.insert("kind".into(), json!(t.info.plural));
    if let Some(uid) = d.object.pointer("/metadata/uid") {
        details.insert("uid".into(), uid.clone());
    }
    let status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Success", "details": details,
    });
    (200, status)
}

fn render(t: &Target, output: Output, v: Value, is_list: bool) -> Value {
    match output {
        Output::Full => v,
        Output::Metadata if is_list => table::partial_list(&v),
        Output::Metadata => table::partial(&v),
        Output::Table(inc) => {
            if is_list {
                let items: Vec<Value> = v
                    .get("items")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                table::table(
                    &t.info,
                    &t.version,
                    &items,
                    v.get("metadata").cloned().unwrap_or(json!({})),
                    inc,
                )
            } else {
                let rv = v
                    .pointer("/metadata/resourceVersion")
                    .cloned()
                    .unwrap_or(Value::Null);
                table::table(
                    &t.info,
                    &t.version,
                    &[v],
                    json!({"resourceVersion": rv}),
                    inc,
                )
            }
        }
    }
}

async fn resource(
    app: &Arc<App>,
    req: Request,
    group: String,
    version: String,
    rest: Vec<String>,
    user: Option<&UserInfo>,
) -> ApiResult<Response> {
    let rp = parse_resource_path(&group, &rest).ok_or_else(StatusError::no_route)?;
    if let Some(user) = user {
        // Authorized before anything else is looked at, as kube-apiserver does: a caller
        // without access learns nothing about what exists.
        let watch = truthy(&parse_query(req.uri().query()), "watch");
        authorize_resource(app, user, req.method(), &group, &rp, watch)?;
    }
    let mut t = app
        .store
        .target(
            &group,
            &version,
            &rp.plural,
            rp.namespace.as_deref().unwrap_or(""),
        )
        .ok_or_else(StatusError::no_route)?;
    if rp.namespace.is_some() && !t.info.namespaced {
        return Err(StatusError::no_route());
    }
    if t.info.namespaced && rp.namespace.is_none() && rp.name.is_some() {
        return Err(StatusError::no_route());
    }
    if pick_subresource(&mut t, rp.subresource.as_deref())? {
        return scale_request(app, req, &t, rp.name).await;
    }
    allowed_by_access(&t, req.method(), rp.name.is_some())?;
    let (parts, body) = req.into_parts();
    let q = parse_query(parts.uri.query());
    let headers = parts.headers;
    let method = parts.method;
    let accept = header_str(&headers, header::ACCEPT).to_string();
    let output = table::output(&accept, q.get("includeObject").map(String::as_str));
    let body = axum::body::to_bytes(body, MAX_BODY)
        .await
        .map_err(|e| StatusError::bad_request(format!("reading the request body failed: {e}")))?;
    // A write's dryRun values are checked before its body is decoded, as there; DELETE
    // takes them with the rest of its DeleteOptions.
    let dry_run = match write_options_kind(&method) {
        Some(kind) => dry_run(&query_values(parts.uri.query(), "dryRun"), kind)?,
        None => false,
    };
    let content_type = header_str(&headers, header::CONTENT_TYPE).to_string();
    let store = &app.store;
    let name = rp.name.clone();
    match (method, name) {
        (Method::GET, Some(name)) => {
            let v = store.get(&t, &name)?;
            reply(200, &render(&t, output, v, false), &accept, &t)
        }
        (Method::GET, None) => {
            let opts = list_options(&q, t.info.builtin)?;
            let is_watch = truthy(&q, "watch");
            let send_initial =
                watch::initial_events(&q, is_watch, *kubewasm_core::sync::lock(&app.watch_list))?;
            if is_watch {
                // Watch streams are JSON only.
                if protobuf::accept_only_protobuf(&accept) {
                    return Err(not_acceptable(false));
                }
                return Ok(start_watch(app, t, opts, &q, send_initial, output));
            }
            let v = store.list(&t, &opts)?;
            reply(200, &render(&t, output, v, true), &accept, &t)
        }
        (Method::POST, None) => {
            let body = decode_write_body(&content_type, &body, &t)?;
            let v = store.create(
                &t,
                body,
                Ownership::Track(manager_name(&q, &headers)),
                dry_run,
            )?;
            reply(201, &v, &accept, &t)
        }
        (Method::PUT, Some(name)) => {
            let body = decode_write_body(&content_type, &body, &t)?;
            let v = store.update(
                &t,
                &name,
                body,
                Ownership::Track(manager_name(&q, &headers)),
                dry_run,
            )?;
            reply(200, &v, &accept, &t)
        }
        (Method::PATCH, Some(name)) => {
            let kind = patch::patch_type(&content_type, t.info.builtin)?;
            if kind == PatchType::Apply {
                let manager = q.get("fieldManager").cloned().unwrap_or_default();
                if manager.is_empty() {
                    return Err(StatusError::new(
                        422,
                        "Invalid",
                        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                    ));
                }
                let config = patch::parse_body(&body, true)?;
                let (v, created) =
                    store.apply(&t, &name, config, &manager, truthy(&q, "force"), dry_run)?;
                return reply(if created { 201 } else { 200 }, &v, &accept, &t);
            }
            let v = store.patch(
                &t,
                &name,
                |current| patch::apply_patch(kind, current, &body),
                Ownership::Track(manager_name(&q, &headers)),
                dry_run,
            )?;
            reply(200, &v, &accept, &t)
        }
        (Method::DELETE, Some(name)) => {
            let body = delete_body(&content_type, &body)?;
            let (opts, orphan_false) = delete_options(parts.uri.query(), &body)?;
            let deleted = store.delete(&t, &name, &opts)?;
            let (code, v) = delete_answer(&t, deleted, orphan_false);
            reply(code, &v, &accept, &t)
        }
        (Method::DELETE, None) => {
            let opts = list_options(&q, t.info.builtin)?;
            let body = delete_body(&content_type, &body)?;
            let (del, _) = delete_options(parts.uri.query(), &body)?;
            let v = store.delete_collection(&t, &opts, &del)?;
            reply(200, &v, &accept, &t)
        }
        _ => Err(StatusError::method_not_allowed()),
    }
}

/// Sets the target's subresource (`status`); true for `scale`, answered apart. Those
/// kube-apiserver has and this server does not emulate are refused, saying so.
fn pick_subresource(t: &mut Target, sub: Option<&str>) -> ApiResult<bool> {
    match sub {
        None => Ok(false),
        Some("status") if t.info.status => {
            t.subresource = Some("status".into());
            Ok(false)
        }
        Some("scale") if t.info.scale => Ok(true),
        Some(sub) if t.info.unemulated.contains(&sub) => {
            Err(not_emulated(&format!("{}/{sub}", t.info.plural)))
        }
        Some(_) => Err(StatusError::no_route()),
    }
}

/// What a scale write makes of the current Scale.
type ScaleEdit = Box<dyn Fn(&Value) -> ApiResult<Value>>;

/// `{workload}/scale`: GET, PUT and merge/JSON/strategic patches of the Scale view;
/// writes go to the workload's `spec.replicas` under the request's field manager.
async fn scale_request(
    app: &Arc<App>,
    req: Request,
    t: &Target,
    name: Option<String>,
) -> ApiResult<Response> {
    let name = name.ok_or_else(StatusError::no_route)?;
    let (parts, body) = req.into_parts();
    let q = parse_query(parts.uri.query());

    let content_type = header_str(&parts.headers, header::CONTENT_TYPE).to_string();
    let body = axum::body::to_bytes(body, MAX_BODY)
        .await
        .map_err(|e| StatusError::bad_request(format!("reading the request body failed: {e}")))?;
    let dry_run = match write_options_kind(&parts.method) {
        Some(kind) => dry_run(&query_values(parts.uri.query(), "dryRun"), kind)?,
        None => false,
    };
    let new_scale: ScaleEdit = match parts.method {
        Method::GET => {
            let v = app.store.get(t, &name)?;
            return Ok(json_response(200, &scale::of(&v)));
        }
        Method::PUT => {
            let body = patch::parse_body(&body, true)?;
            Box::new(move |_: &Value| Ok(body.clone()))
        }
        Method::PATCH => match patch::patch_type(&content_type, true)? {
            PatchType::Apply => {
                return Err(StatusError::unsupported_media_type(
                    &content_type,
                    &[
                        "application/json-patch+json",
                        "application/merge-patch+json",
                    ],
                ));
            }
            kind => Box::new(move |s: &Value| patch::apply_patch(kind, s, &body)),
        },
        _ => return Err(StatusError::method_not_allowed()),
    };
    let conflict = || StatusError::stale(&t.info.group, &t.info.plural, &name);
    let v = app.store.patch(
        t,
        &name,
        |current| scale::apply(current, &new_scale(&scale::of(current))?, conflict),
        Ownership::Track(manager_name(&q, &parts.headers)),
        dry_run,
    )?;
    Ok(json_response(200, &scale::of(&v)))
}

/// The verbs of read-only and virtual built-ins: `componentstatuses` are read (none is
/// stored, so the list is empty); virtual kinds the server does not answer itself
/// (`bindings`, `selfsubjectrulesreviews`, ...) are in discovery but refused, saying why.
fn allowed_by_access(t: &Target, method: &Method, named: bool) -> ApiResult<()> {
    match t.info.access {
        Verbs::Crud => Ok(()),
        Verbs::Read if *method == Method::GET => Ok(()),
        Verbs::Read => Err(StatusError::method_not_allowed()),
        Verbs::Create if *method == Method::POST && !named => Err(not_emulated(&t.info.plural)),
        Verbs::Create => Err(StatusError::method_not_allowed()),
    }
}

/// 405 for what kube-apiserver serves and this server does not emulate (a node, a
/// controller or a token issuer would be needed), rather than a bare 404.
fn not_emulated(what: &str) -> StatusError {
    StatusError::new(
        405,
        "MethodNotAllowed",
        format!("{what} is not emulated by the kubewasm API server (see its README)"),
    )
}

fn decode_write_body(content_type: &str, body: &[u8], t: &Target) -> ApiResult<Value> {
    let media = content_type.split(';').next().unwrap_or("").trim();
    match media {
        "" | "application/json" | "*/*" => patch::parse_body(body, false),
        "application/yaml" | "application/apply-patch+yaml" => patch::parse_body(body, true),
        // Built-in kinds take Kubernetes protobuf (kubectl's typed commands send it);
        // custom resources have no protobuf form, as on kube-apiserver.
        protobuf::MEDIA_TYPE
            if t.info.builtin
                && protobuf::supports(&t.info.api_version(&t.version), &t.info.kind) =>
        {
            protobuf::decode(body).map_err(|e| {
                StatusError::bad_request(format!(
                    "{kind} in version \"{version}\" cannot be handled as a {kind}: {e}",
                    kind = t.info.kind,
                    version = t.version,
                ))
            })
        }
        other if t.info.builtin => Err(StatusError::unsupported_media_type(
            other,
            &["application/json", "application/yaml", protobuf::MEDIA_TYPE],
        )),
        other => Err(StatusError::unsupported_media_type(
            other,
            &["application/json", "application/yaml"],
        )),
    }
}

/// A DELETE body as JSON: DeleteOptions may come as protobuf from typed clients.
fn delete_body(content_type: &str, body: &[u8]) -> ApiResult<Vec<u8>> {
    let media = content_type.split(';').next().unwrap_or("").trim();
    if media != protobuf::MEDIA_TYPE || body.is_empty() {
        return Ok(body.to_vec());
    }
    let v = protobuf::decode(body)
        .map_err(|e| StatusError::bad_request(format!("error decoding DeleteOptions: {e}")))?;
    Ok(serde_json::to_vec(&v).unwrap_or_default())
}

fn start_watch(
    app: &Arc<App>,
    t: Target,
    opts: ListOptions,
    q: &HashMap<String, String>,
    send_initial: Option<bool>,
    output: Output,
) -> Response {
    let rv = q.get("resourceVersion").map(String::as_str).unwrap_or("");
    let after = match rv {
        "" | "0" => None,
        n => match n.parse::<u64>() {
            Ok(n) => Some(n),
            Err(_) => {
                return status_response(&StatusError::bad_request(format!(
                    "invalid resource version: {n}"
                )));
            }
        },
    };
    // This store is always current, so a watch-list's resourceVersion ("not older than")
    // is met at once; `sendInitialEvents=false` from "" or "0" starts at the current
    // state without sending it.
    let from = match (send_initial, after) {
        (Some(true), _) | (None, None) => WatchFrom::State,
        (_, Some(n)) => WatchFrom::After(n),
        (Some(false), None) => WatchFrom::Now,
    };
    let send_initial = send_initial == Some(true);
    let (mut tx, rx) = watch::channel();
    let response = Response::builder()
        .status(200)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CACHE_CONTROL, "no-cache, private")
        .body(Body::from_stream(rx))
        .unwrap_or_default();
    let bookmarks = truthy(q, "allowWatchBookmarks");
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|s| *s > 0)
        .map(Duration::from_secs);
    let app = app.clone();
    tokio::spawn(async move {
        // During a simulated outage the request is held, like a partitioned server;
        // it starts (or gets 410 Expired) once watches resume.
        let mut outage = app.outage.clone();
        let resumed = outage.wait_for(|down| !*down).await.map(|_| ()).is_ok();
        if !resumed {
            return;
        }
        match app.store.watch(&t.info.gr(), from) {
            Err(e) => {
                // kube-apiserver answers 200 and one ERROR event (Status 410 Expired).
                use futures::SinkExt;
                let _ = tx.send(Ok(watch::error_line(&e.to_status()))).await;
            }
            Ok(start) => {
                let req = WatchRequest {
                    target: t,
                    opts,
                    bookmarks,
                    send_initial_events: send_initial,
                    timeout,
                    bookmark_interval: app.bookmark_interval,
                    output,
                };
                watch::run(req, start, tx, app.shutdown.clone(), app.outage.clone()).await;
            }
        }
    });
    response
}
