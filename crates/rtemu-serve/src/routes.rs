//! The API's handlers. Each checks its path parameters first (lab names with [`LabName`], node
//! and link names against the lab's state) and runs lab work (namespaces, netlink, processes,
//! the engine's control socket) on tokio's blocking threads.

use std::collections::BTreeSet;
use std::convert::Infallible;

use axum::body::Body;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, RawQuery, State as AxumState};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::StreamExt;
use rtemu_topo::lab::LabError;
use rtemu_topo::state::{LabName, State};
use tokio::sync::watch;

use rtemu_api::body::{
    self, DownReply, ErrorBody, ExecReply, ExecRequest, InterfaceCounters, Lab, LabSummary, Lan,
    Link, Node, PartRequest, ScheduleRequest, SetRequest, Stamp, StatsReply, UpRequest, Vnis,
};
use rtemu_control::message::Ack;

use rtemu_cluster::link::Change;
use rtemu_cluster::spread::Spread;

use crate::error::ApiError;
use crate::spread::Coordinator;
use crate::{capture, ctl, exec, spread};

/// What every handler shares.
#[derive(Clone)]
pub struct App {
    /// Becomes `true` when the server stops: endless streams end then.
    pub shutdown: watch::Receiver<bool>,
    /// Places for stats streams open at once ([`MAX_STATS_STREAMS`]): each takes a snapshot
    /// on a blocking thread at every tick.
    pub streams: std::sync::Arc<tokio::sync::Semaphore>,
    /// The agents' credentials when the server coordinates labs across hosts
    /// ([`App::coordinating`]); `None`: it serves its own labs only.
    pub coordinator: Option<Coordinator>,
}

/// The most stats streams (`GET /v1/labs/{lab}/stats/stream`) open at once; one more is
/// answered 503. 300 streams at 50 ms took 94 % of a CPU and 385 MB that was never returned.
pub const MAX_STATS_STREAMS: usize = 32;

impl App {
    /// What the handlers of a server share, which stops when `shutdown` becomes `true`.
    pub fn new(shutdown: watch::Receiver<bool>) -> App {
        App {
            shutdown,
            streams: std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_STATS_STREAMS)),
            coordinator: None,
        }
    }

    /// The same, coordinating labs across hosts with the agents' credentials `coordinator`.
    pub fn coordinating(self, coordinator: Option<Coordinator>) -> App {
        App {
            coordinator,
            ..self
        }
    }

    /// Lab `lab` across hosts, when this server brought it up so; `None` for any other lab.
    async fn spread(&self, lab: &str) -> Result<Option<Spread>, ApiError> {
        let Some(c) = self.coordinator.clone() else {
            return Ok(None);
        };
        let name = LabName::new(lab)?;
        blocking(move || spread::open(&c, &name)).await
    }

    /// Resolves when the server stops.
    fn stopped(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.shutdown.clone();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    }
}

/// The API's routes (without authentication, which the TCP listener adds).
pub fn router(app: App) -> Router {
    Router::new()
        .route("/openapi.json", get(openapi))
        .route("/metrics", get(metrics))
        .route("/v1/labs", get(list_labs).post(up))
        .route("/v1/labs/{lab}", get(get_lab).delete(down))
        .route("/v1/labs/{lab}/nodes", get(list_nodes))
        .route("/v1/labs/{lab}/links", get(list_links))
        .route("/v1/labs/{lab}/lans", get(list_lans))
        .route("/v1/labs/{lab}/links/{link}/set", post(set_link))
        .route("/v1/labs/{lab}/links/{link}/down", post(link_down))
        .route("/v1/labs/{lab}/links/{link}/up", post(link_up))
        .route("/v1/labs/{lab}/links/{link}/schedule", post(schedule))
        .route("/v1/labs/{lab}/stats", get(stats))
        .route("/v1/labs/{lab}/stats/stream", get(stats_stream))
        .route("/v1/labs/{lab}/counters", get(counters))
        .route("/v1/labs/{lab}/capture", get(capture))
        .route("/v1/labs/{lab}/nodes/{node}/exec", post(exec))
        .route("/v1/labs/{lab}/nodes/{node}/logs", get(logs))
        .route("/v1/vnis", get(vnis))
        .route("/v1/parts", post(up_part))
        .fallback(|| async {
            ApiError::not_found(
                "no such resource: the API is under /v1 (GET /openapi.json describes it)",
            )
        })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "this resource does not take that method (GET /openapi.json describes the API)",
            )
        })
        // A topology file may have 16 MiB; its JSON string a little more.
        .layer(axum::extract::DefaultBodyLimit::max(40 << 20))
        .with_state(app)
}

/// Runs `f` on a blocking thread.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the request's work failed: {e}"),
        )
    })?
}

/// A path's parameters, or a 400 saying why they are not.
fn params<T>(p: Result<Path<T>, PathRejection>) -> Result<T, ApiError> {
    p.map(|Path(t)| t)
        .map_err(|e| ApiError::bad_request(e.body_text()))
}

/// A request body's bytes read as the JSON of a `T`, as the handlers' `Json` extractor reads
/// them once it found a JSON content type (the fuzz targets read bodies with it).
pub fn json_body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    body(Json::from_bytes(bytes))
}

/// A JSON body, or a 400 (415 without a JSON content type) saying why it is not one.
fn body<T>(b: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    b.map(|Json(t)| t).map_err(|e| {
        let status = match e {
            JsonRejection::MissingJsonContentType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, bounded(e.body_text()))
    })
}

/// The most bytes of a body's JSON error kept whole: longer ones quote a value of the body
/// (an unknown field or variant, a string of the wrong type).
const MAX_JSON_ERROR: usize = 800;

/// `text` whole when short, else its start (what was wrong where) and end (what was
/// expected, the line and column) around a note of what was cut, so a value of the body is
/// never echoed whole.
fn bounded(text: String) -> String {
    if text.len() <= MAX_JSON_ERROR {
        return text;
    }
    let keep = MAX_JSON_ERROR / 2 - 20;
    let (mut head, mut tail) = (keep, text.len() - keep);
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}… ({} bytes cut) …{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

/// The state of lab `name` (a 404 when there is none). Blocks.
pub(crate) fn load(name: &LabName) -> Result<State, ApiError> {
    State::load(name)?.ok_or_else(|| LabError::NoSuchLab(name.to_string()).into())
}

/// Checks the lab name and loads its state.
async fn lab_state(lab: String) -> Result<State, ApiError> {
    let name = LabName::new(&lab)?;
    blocking(move || load(&name)).await
}

/// A lab as the server reaches it.
enum Located {
    /// Across hosts, which this server coordinates: its hosts' agents answer.
    Hosts(Box<Spread>),
    /// This host's own (or this host's part of another coordinator's lab).
    Here(Box<State>),
}

impl App {
    /// Lab `lab`: across hosts when this server brought it up so, else this host's (a 404 when
    /// neither holds it).
    async fn locate(&self, lab: String) -> Result<Located, ApiError> {
        Ok(match self.spread(&lab).await? {
            Some(spread) => Located::Hosts(Box::new(spread)),
            None => Located::Here(Box::new(lab_state(lab).await?)),
        })
    }

    /// The one place a request on lab `lab` goes one way or the other: `across` of the lab
    /// across hosts, or `here` of this host's, on a blocking thread.
    async fn on_lab<T: Send + 'static>(
        &self,
        lab: String,
        across: impl FnOnce(&Spread) -> Result<T, ApiError> + Send + 'static,
        here: impl FnOnce(&State) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        match self.locate(lab).await? {
            Located::Hosts(spread) => blocking(move || across(&spread)).await,
            Located::Here(state) => blocking(move || here(&state)).await,
        }
    }
}

/// A query string's pairs, decoded.
pub fn query_pairs(q: Option<String>) -> Vec<(String, String)> {
    form_urlencoded::parse(q.unwrap_or_default().as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// The OpenAPI document of this API.
#[utoipa::path(get, path = "/openapi.json", tag = "api",
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json")))]
pub async fn openapi() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        crate::openapi_json(),
    )
        .into_response()
}

/// Every running lab, counted rather than listed (`GET /v1/labs/{lab}` gives one whole, when
/// its `revision` is not the one the caller holds); a lab directory whose state cannot be
/// read is an entry of status `unreadable`, with why.
#[utoipa::path(get, path = "/v1/labs", tag = "labs",
    responses((status = 200, body = [LabSummary]), (status = 500, body = ErrorBody)))]
pub async fn list_labs(AxumState(app): AxumState<App>) -> Result<Json<Vec<LabSummary>>, ApiError> {
    blocking(move || {
        let (states, unreadable) = State::load_all()?;
        // A state replaced since it was read shows under its new revision: a caller fetches
        // the lab again, which is all a revision is for.
        let mut labs: Vec<LabSummary> = states
            .iter()
            .map(|s| ctl::summary(s, Stamp::of(&s.lab)))
            .collect();
        labs.extend(unreadable.iter().map(body::unreadable_summary));
        if let Some(c) = &app.coordinator {
            labs.extend(spread::labs(c)?);
        }
        labs.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(labs)
    })
    .await
    .map(Json)
}

/// Brings a lab up from a topology (inline TOML or a file).
#[utoipa::path(post, path = "/v1/labs", tag = "labs", request_body = UpRequest,
    responses((status = 201, body = Lab),
        (status = 400, description = "Bad TOML (FILE:LINE:COLUMN: …), bad name", body = ErrorBody),
        (status = 409, description = "The lab exists (and `replace` is false)", body = ErrorBody),
        (status = 500, body = ErrorBody)))]
pub async fn up(
    AxumState(app): AxumState<App>,
    b: Result<Json<UpRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let req = body(b)?;
    let lab = blocking(move || ctl::up(&req, app.coordinator.as_ref())).await?;
    Ok((StatusCode::CREATED, Json(lab)).into_response())
}

/// One lab, whole. Its `ETag` is its revision: asked `If-None-Match` with it, the server
/// answers 304 without building the lab's view.
#[utoipa::path(get, path = "/v1/labs/{lab}", tag = "labs",
    params(("lab" = String, Path, description = "The lab's name"),
        ("If-None-Match" = Option<String>, Header, description = "Revisions the caller holds, as entity tags (`\"REVISION\"`)")),
    responses((status = 200, body = Lab, headers(("ETag" = String, description = "The lab's revision, quoted"))),
        (status = 304, description = "The lab is still at a revision `If-None-Match` names", headers(("ETag" = String, description = "The lab's revision, quoted"))),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn get_lab(
    AxumState(app): AxumState<App>,
    p: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let lab = params(p)?;
    let held = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let holds = move |revision: &str| held.as_deref().is_some_and(|h| names(h, revision));
    let name = LabName::new(&lab)?;
    // Where the state file stood before it is read (see `Stamp`).
    let stamp = blocking(move || Ok(Stamp::of(&name))).await?;
    let across = {
        let holds = holds.clone();
        move |spread: &Spread| {
            let revision = spread::summary(spread)?.revision;
            if holds(&revision) {
                return Ok(Err(revision));
            }
            spread::view(spread).map(Ok)
        }
    };
    let here = move |state: &State| {
        let revision = ctl::summary(state, stamp).revision;
        if holds(&revision) {
            return Ok(Err(revision));
        }
        Ok(Ok(ctl::view(state, stamp)))
    };
    let etag = |revision: &str| (header::ETAG, format!("\"{revision}\""));
    Ok(match app.on_lab(lab, across, here).await? {
        Ok(view) => ([etag(&view.revision)], Json(view)).into_response(),
        Err(revision) => (StatusCode::NOT_MODIFIED, [etag(&revision)]).into_response(),
    })
}

/// Whether the entity tags of an `If-None-Match` header `header` name `revision` (weakly, as
/// RFC 9110 compares them for it), or are `*`.
pub fn names(header: &str, revision: &str) -> bool {
    header.split(',').map(str::trim).any(|tag| {
        tag == "*"
            || tag
                .strip_prefix("W/")
                .unwrap_or(tag)
                .strip_prefix('"')
                .and_then(|t| t.strip_suffix('"'))
                == Some(revision)
    })
}

/// Takes a lab down: stops its engine (returning its final report) and removes everything it
/// made.
#[utoipa::path(delete, path = "/v1/labs/{lab}", tag = "labs",
    params(("lab" = String, Path, description = "The lab's name")),
    responses((status = 200, body = DownReply), (status = 400, body = ErrorBody), (status = 500, body = ErrorBody)))]
pub async fn down(
    AxumState(app): AxumState<App>,
    p: Result<Path<String>, PathRejection>,
) -> Result<Json<DownReply>, ApiError> {
    let name = LabName::new(&params(p)?)?;
    blocking(move || {
        if let Some(c) = &app.coordinator {
            if let Some(down) = spread::down(c, &name)? {
                return Ok(down);
            }
        }
        ctl::down(&name)
    })
    .await
    .map(Json)
}

/// A lab's nodes with their interfaces and addresses.
#[utoipa::path(get, path = "/v1/labs/{lab}/nodes", tag = "labs",
    params(("lab" = String, Path, description = "The lab's name")),
    responses((status = 200, body = [Node]), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn list_nodes(
    AxumState(app): AxumState<App>,
    p: Result<Path<String>, PathRejection>,
) -> Result<Json<Vec<Node>>, ApiError> {
    let across = |spread: &Spread| Ok(spread::view(spread)?.nodes);
    app.on_lab(params(p)?, across, |state| Ok(body::nodes(state)))
        .await
        .map(Json)
}

/// A lab's point-to-point links.
#[utoipa::path(get, path = "/v1/labs/{lab}/links", tag = "labs",
    params(("lab" = String, Path, description = "The lab's name")),
    responses((status = 200, body = [Link]), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn list_links(
    AxumState(app): AxumState<App>,
    p: Result<Path<String>, PathRejection>,
) -> Result<Json<Vec<Link>>, ApiError> {
    let across = |spread: &Spread| Ok(spread::view(spread)?.links);
    app.on_lab(params(p)?, across, |state| Ok(body::links(state)))
        .await
        .map(Json)
}

/// A lab's LANs.
#[utoipa::path(get, path = "/v1/labs/{lab}/lans", tag = "labs",
    params(("lab" = String, Path, description = "The lab's name")),
    responses((status = 200, body = [Lan]), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn list_lans(
    AxumState(app): AxumState<App>,
    p: Result<Path<String>, PathRejection>,
) -> Result<Json<Vec<Lan>>, ApiError> {
    let across = |spread: &Spread| Ok(body::lans(&spread.state()));
    app.on_lab(params(p)?, across, |state| Ok(body::lans(state)))
        .await
        .map(Json)
}

/// Gives an impaired link new netem parameters, while traffic flows.
#[utoipa::path(post, path = "/v1/labs/{lab}/links/{link}/set", tag = "links", request_body = SetRequest,
    params(("lab" = String, Path, description = "The lab's name"), ("link" = String, Path, description = "An impaired link of the lab")),
    responses((status = 200, body = Ack), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 503, description = "The lab's engine does not answer", body = ErrorBody)))]
pub async fn set_link(
    AxumState(app): AxumState<App>,
    p: Result<Path<(String, String)>, PathRejection>,
    b: Result<Json<SetRequest>, JsonRejection>,
) -> Result<Json<Ack>, ApiError> {
    let (lab, link) = params(p)?;
    let req = body(b)?;
    let (there, asked) = (link.clone(), req.clone());
    let across = move |spread: &Spread| {
        let netem = ctl::parse_netem("netem", &asked.netem)?;
        let change = Change::Set {
            dir: asked.dir,
            netem,
        };
        spread::change(spread, &there, &change)
    };
    let here = move |state: &State| ctl::set(state, &link, req.dir, &req.netem);
    app.on_lab(lab, across, here).await?;
    Ok(Json(Ack::OK))
}

/// Cuts an impaired link: it carries nothing until `up`.
#[utoipa::path(post, path = "/v1/labs/{lab}/links/{link}/down", tag = "links",
    params(("lab" = String, Path, description = "The lab's name"), ("link" = String, Path, description = "An impaired link of the lab")),
    responses((status = 200, body = Ack), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn link_down(
    AxumState(app): AxumState<App>,
    p: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<Ack>, ApiError> {
    cut(app, p, true).await
}

/// Joins a cut link again.
#[utoipa::path(post, path = "/v1/labs/{lab}/links/{link}/up", tag = "links",
    params(("lab" = String, Path, description = "The lab's name"), ("link" = String, Path, description = "An impaired link of the lab")),
    responses((status = 200, body = Ack), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn link_up(
    AxumState(app): AxumState<App>,
    p: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<Ack>, ApiError> {
    cut(app, p, false).await
}

async fn cut(
    app: App,
    p: Result<Path<(String, String)>, PathRejection>,
    down: bool,
) -> Result<Json<Ack>, ApiError> {
    let (lab, link) = params(p)?;
    let there = link.clone();
    let across = move |spread: &Spread| spread::change(spread, &there, &Change::Cut(down));
    let here = move |state: &State| ctl::cut(state, &link, down);
    app.on_lab(lab, across, here).await?;
    Ok(Json(Ack::OK))
}

/// Changes an impaired link's parameters at set times after the request (the engine applies
/// them, behind the frames then in flight).
#[utoipa::path(post, path = "/v1/labs/{lab}/links/{link}/schedule", tag = "links", request_body = ScheduleRequest,
    params(("lab" = String, Path, description = "The lab's name"), ("link" = String, Path, description = "An impaired link of the lab")),
    responses((status = 200, body = Ack), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn schedule(
    AxumState(app): AxumState<App>,
    p: Result<Path<(String, String)>, PathRejection>,
    b: Result<Json<ScheduleRequest>, JsonRejection>,
) -> Result<Json<Ack>, ApiError> {
    let start = std::time::Instant::now();
    let (lab, link) = params(p)?;
    let req = std::sync::Arc::new(body(b)?);
    let (there, asked) = (link.clone(), std::sync::Arc::clone(&req));
    let across = move |spread: &Spread| {
        // Checked here, so a bad request is refused before any agent is asked.
        ctl::schedule_steps(&asked)?;
        spread::schedule(spread, &there, &asked)
    };
    let here = move |state: &State| ctl::schedule(state, &link, &req, start);
    app.on_lab(lab, across, here).await?;
    Ok(Json(Ack::OK))
}

/// The counters and fidelity of every impaired link's directions, now.
#[utoipa::path(get, path = "/v1/labs/{lab}/stats", tag = "stats",
    params(("lab" = String, Path, description = "The lab's name")),
    responses((status = 200, body = StatsReply), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 503, description = "The lab's engine does not answer", body = ErrorBody)))]
pub async fn stats(
    AxumState(app): AxumState<App>,
    p: Result<Path<String>, PathRejection>,
) -> Result<Json<StatsReply>, ApiError> {
    app.on_lab(params(p)?, spread::stats, ctl::stats)
        .await
        .map(Json)
}

/// Every lab's and engine's counters as Prometheus metrics (docs/metrics.md), read as
/// `GET /v1/labs/{lab}/stats` reads them.
#[utoipa::path(get, path = "/metrics", tag = "stats",
    responses((status = 200, description = "Prometheus's text exposition format 0.0.4", content_type = "text/plain; version=0.0.4; charset=utf-8"),
        (status = 500, body = ErrorBody)))]
pub async fn metrics() -> Result<Response, ApiError> {
    let labs = blocking(crate::metrics::gather).await?;
    let text = crate::metrics::encode(&labs);
    let content_type = crate::metrics::exposition::CONTENT_TYPE;
    Ok(([(header::CONTENT_TYPE, content_type)], text).into_response())
}

/// The kernel's packet counters of every interface of the lab's nodes, or of the nodes named
/// by `node`: the counters of ideal links and LANs, which the engine does not carry. A large
/// lab's every node costs a namespace's worth of netlink each (2 s for 10,000 nodes): the web
/// view asks for the nodes of the links it shows.
#[utoipa::path(get, path = "/v1/labs/{lab}/counters", tag = "stats",
    params(("lab" = String, Path, description = "The lab's name"),
        ("node" = Option<Vec<String>>, Query, description = "Only this node's interfaces; repeated; none: every node's")),
    responses((status = 200, body = [InterfaceCounters]), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 500, body = ErrorBody)))]
pub async fn counters(
    AxumState(app): AxumState<App>,
    p: Result<Path<String>, PathRejection>,
    RawQuery(q): RawQuery,
) -> Result<Json<Vec<InterfaceCounters>>, ApiError> {
    let only = std::sync::Arc::new(counters_query(&query_pairs(q))?);
    let asked = std::sync::Arc::clone(&only);
    let across = move |spread: &Spread| spread::counters(spread, asked.as_ref().as_ref());
    let here = move |state: &State| ctl::counters(state, only.as_ref().as_ref());
    app.on_lab(params(p)?, across, here).await.map(Json)
}

/// Reads the `node` names of a counters request; `None` when there are none (every node).
pub fn counters_query(pairs: &[(String, String)]) -> Result<Option<BTreeSet<String>>, ApiError> {
    let mut nodes = BTreeSet::new();
    for (k, v) in pairs {
        match k.as_str() {
            "node" => {
                nodes.insert(v.clone());
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown query parameter {}: counters takes `node`",
                    rtemu_sys::terminal::quoted(other)
                )))
            }
        }
    }
    Ok((!nodes.is_empty()).then_some(nodes))
}

/// The shortest interval between stats events, seconds.
pub const MIN_INTERVAL: f64 = 0.05;
/// The longest interval between stats events, seconds.
pub const MAX_INTERVAL: f64 = 3600.0;
/// The most stats events one stream may ask for.
pub const MAX_EVENTS: u64 = 1_000_000;

/// Reads `interval` and `count` of a stats stream.
pub fn stream_query(pairs: &[(String, String)]) -> Result<(f64, Option<u64>), ApiError> {
    let (mut interval, mut count) = (1.0, None);
    for (k, v) in pairs {
        match k.as_str() {
            "interval" => {
                interval = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| (MIN_INTERVAL..=MAX_INTERVAL).contains(s))
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "interval {} is out of range: give seconds from {MIN_INTERVAL} \
                             to {MAX_INTERVAL}",
                            rtemu_sys::terminal::quoted(v)
                        ))
                    })?
            }
            "count" => {
                count = Some(
                    v.parse::<u64>()
                        .ok()
                        .filter(|c| (1..=MAX_EVENTS).contains(c))
                        .ok_or_else(|| {
                            ApiError::bad_request(format!(
                                "count {} is out of range: give a number of events from 1 \
                                 to {MAX_EVENTS}",
                                rtemu_sys::terminal::quoted(v)
                            ))
                        })?,
                )
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown query parameter {}: a stats stream takes interval and count",
                    rtemu_sys::terminal::quoted(other)
                )))
            }
        }
    }
    Ok((interval, count))
}

/// Reads `tail` of a logs request (the range is checked where the lines are read).
pub fn logs_query(pairs: &[(String, String)]) -> Result<Option<u32>, ApiError> {
    let mut tail = None;
    for (k, v) in pairs {
        match (k.as_str(), v.parse::<u32>()) {
            ("tail", Ok(n)) => tail = Some(n),
            ("tail", Err(_)) => {
                return Err(ApiError::bad_request(format!(
                    "tail {} is not a number of lines: give 1 to {}",
                    rtemu_sys::terminal::quoted(v),
                    exec::MAX_LOG_LINES
                )))
            }
            (other, _) => {
                return Err(ApiError::bad_request(format!(
                    "unknown query parameter {}: logs takes `tail`",
                    rtemu_sys::terminal::quoted(other)
                )))
            }
        }
    }
    Ok(tail)
}

/// Stats as Server-Sent Events: an `event: stats` every `interval` seconds (the first at
/// once), `count` of them or until the client leaves; when the lab goes down or its engine
/// stops answering, an `event: end` with data `{}`, and the stream ends.
#[utoipa::path(get, path = "/v1/labs/{lab}/stats/stream", tag = "stats",
    params(("lab" = String, Path, description = "The lab's name"),
        ("interval" = Option<f64>, Query, description = "Seconds between events, in [0.05, 3600] (default 1)"),
        ("count" = Option<u64>, Query, description = "Events to send, in [1, 1000000] (default: until the client leaves or the lab goes down)")),
    responses((status = 200, description = "`event: stats` with `data:` a StatsReply as one line of JSON; `event: end` with `{}` at the end", content_type = "text/event-stream"),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn stats_stream(
    AxumState(app): AxumState<App>,
    p: Result<Path<String>, PathRejection>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    let lab = params(p)?;
    let (interval, count) = stream_query(&query_pairs(q))?;
    // Held by the stream, so given back when it ends or its client goes.
    let place = app.streams.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "{MAX_STATS_STREAMS} stats streams are open, the most the server serves at \
                 once: close one, or poll /v1/labs/{{lab}}/stats"
            ),
        )
    })?;
    let source = match app.locate(lab).await? {
        Located::Hosts(spread) => Source::Hosts(std::sync::Arc::new(*spread)),
        Located::Here(state) => Source::Here(state.lab),
    };
    // The first snapshot is taken before answering, so a lab whose engine is gone is an error
    // status rather than an empty stream.
    let first = source.snapshot().await?;
    // Snapshots keep the interval's cadence however long each takes (a late one is not
    // followed by a burst).
    let mut ticks = tokio::time::interval(std::time::Duration::from_secs_f64(interval));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    let events = futures_util::stream::unfold(
        (Some(first), 0u64, source, ticks, false),
        move |(ready, sent, source, mut ticks, ended)| async move {
            if ended || count.is_some_and(|c| sent >= c) {
                return None;
            }
            let snapshot = match ready {
                Some(s) => Ok(s),
                None => {
                    ticks.tick().await;
                    source.snapshot().await
                }
            };
            let Ok(snapshot) = snapshot else {
                // The lab went down, or its engine stopped answering.
                let end = Event::default().event("end").data("{}");
                return Some((Ok(end), (None, sent, source, ticks, true)));
            };
            let event = Event::default()
                .event("stats")
                .data(serde_json::to_string(&snapshot).expect("stats serialise"));
            Some((
                Ok::<_, Infallible>(event),
                (None, sent + 1, source, ticks, false),
            ))
        },
    )
    .take_until(app.stopped())
    .map(move |event| {
        let _held = &place;
        event
    });
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// Where a stats stream's snapshots come from.
#[derive(Clone)]
enum Source {
    /// A lab of this host, loaded again at each snapshot: a lab that went down ends the
    /// stream.
    Here(LabName),
    /// A lab across hosts this server coordinates: its engine hosts' agents, whose lab gone
    /// down ends the stream.
    Hosts(std::sync::Arc<Spread>),
}

impl Source {
    /// A snapshot of the lab's stats, taken on a blocking thread.
    async fn snapshot(&self) -> Result<StatsReply, ApiError> {
        match self.clone() {
            Source::Here(name) => blocking(move || ctl::stats(&load(&name)?)).await,
            Source::Hosts(spread) => blocking(move || spread::stats(&spread)).await,
        }
    }
}

/// Packets of a lab's interfaces, as a pcapng file written while they are captured.
#[utoipa::path(get, path = "/v1/labs/{lab}/capture", tag = "capture",
    params(("lab" = String, Path, description = "The lab's name"),
        ("target" = Option<Vec<String>>, Query, description = "NODE:IF or a link's name (both its ends); repeated; none: every interface"),
        ("count" = Option<u64>, Query, description = "Stop after this many packets, 1 to 10000000"),
        ("duration" = Option<f64>, Query, description = "Stop after this many seconds, above 0, at most 3600 (count or duration is required)")),
    responses((status = 200, description = "A pcapng file", content_type = "application/x-pcapng"),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn capture(
    AxumState(app): AxumState<App>,
    p: Result<Path<String>, PathRejection>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    let lab = params(p)?;
    let req = capture::parse(&query_pairs(q))?;
    let located = app.locate(lab).await?;
    // The targets are checked before answering, so a name no node or link has is refused
    // (400) rather than an empty file.
    let (located, targets) = {
        let wanted = req.targets.clone();
        blocking(move || {
            let targets = match &located {
                Located::Hosts(spread) => {
                    rtemu_topo::capture::resolve_targets(&spread.state(), &wanted)?
                }
                Located::Here(state) => rtemu_topo::capture::resolve_targets(state, &wanted)?,
            };
            Ok((located, targets))
        })
        .await?
    };
    let (rx, guard) = match located {
        Located::Hosts(spread) => capture::start_across(*spread, &req),
        Located::Here(state) => capture::start(*state, targets, &req),
    };
    let chunks = futures_util::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        rx.recv()
            .await
            .map(|chunk| (Ok::<_, Infallible>(chunk), (rx, guard)))
    })
    .take_until(app.stopped());
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-pcapng"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"capture.pcapng\"",
            ),
        ],
        Body::from_stream(chunks),
    )
        .into_response())
}

/// Runs a command (an argv array, never a shell string) in a node and returns its output.
#[utoipa::path(post, path = "/v1/labs/{lab}/nodes/{node}/exec", tag = "exec", request_body = ExecRequest,
    params(("lab" = String, Path, description = "The lab's name"), ("node" = String, Path, description = "A node of the lab")),
    responses((status = 200, body = ExecReply), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn exec(
    AxumState(app): AxumState<App>,
    p: Result<Path<(String, String)>, PathRejection>,
    b: Result<Json<ExecRequest>, JsonRejection>,
) -> Result<Json<ExecReply>, ApiError> {
    let (lab, node) = params(p)?;
    let req = std::sync::Arc::new(body(b)?);
    exec::check(&req)?;
    let (there, asked) = (node.clone(), std::sync::Arc::clone(&req));
    let across = move |spread: &Spread| spread::exec(spread, &there, &asked);
    let here = move |state: &State| exec::run(state, &node, &req);
    app.on_lab(lab, across, here).await.map(Json)
}

/// A node's output: its container's, or its start-up commands' (the last `tail` lines).
#[utoipa::path(get, path = "/v1/labs/{lab}/nodes/{node}/logs", tag = "exec",
    params(("lab" = String, Path, description = "The lab's name"), ("node" = String, Path, description = "A node of the lab"),
        ("tail" = Option<u32>, Query, description = "Only the last lines, 1 to 100000 (default 100000)")),
    responses((status = 200, body = ExecReply), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn logs(
    AxumState(app): AxumState<App>,
    p: Result<Path<(String, String)>, PathRejection>,
    RawQuery(q): RawQuery,
) -> Result<Json<ExecReply>, ApiError> {
    let (lab, node) = params(p)?;
    let tail = logs_query(&query_pairs(q))?;
    let there = node.clone();
    let across = move |spread: &Spread| spread::logs(spread, &there, tail);
    let here = move |state: &State| exec::logs(state, &node, tail);
    app.on_lab(lab, across, here).await.map(Json)
}

/// The VXLAN VNIs this host's labs use: a coordinator asks every host of a new multi-host lab
/// and allocates the lab's VNIs from what none uses.
#[utoipa::path(get, path = "/v1/vnis", tag = "hosts",
    responses((status = 200, body = Vnis), (status = 500, body = ErrorBody)))]
pub async fn vnis() -> Result<Json<Vnis>, ApiError> {
    blocking(ctl::vnis).await.map(Json)
}

/// Brings up this host's part of a multi-host lab, with its engine when this host runs any
/// impaired link's; `DELETE /v1/labs/{lab}` takes it down.
#[utoipa::path(post, path = "/v1/parts", tag = "hosts", request_body = PartRequest,
    responses((status = 201, body = Lab),
        (status = 400, description = "Bad TOML (FILE:LINE:COLUMN: …), a host not in [hosts], VNIs that do not fit the file", body = ErrorBody),
        (status = 409, description = "The lab exists here, or this machine does not hold the host's address", body = ErrorBody),
        (status = 500, body = ErrorBody)))]
pub async fn up_part(b: Result<Json<PartRequest>, JsonRejection>) -> Result<Response, ApiError> {
    let req = body(b)?;
    let lab = blocking(move || ctl::up_part(&req)).await?;
    Ok((StatusCode::CREATED, Json(lab)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_s_json_error_never_echoes_a_long_value_whole() {
        let long = format!(
            "{{\"netem\": \"delay 1ms\", \"dir\": \"{}é\"}}",
            "x".repeat(5000)
        );
        let e = json_body::<SetRequest>(long.as_bytes()).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e.message.len() <= MAX_JSON_ERROR, "{}", e.message.len());
        assert!(e.message.contains("unknown variant"), "{}", e.message);
        assert!(e.message.contains("bytes cut"), "{}", e.message);
        assert!(e.message.contains("expected one of"), "{}", e.message);
        let short = json_body::<SetRequest>(b"{\"netem\": 1}").unwrap_err();
        assert!(!short.message.contains("cut"), "{}", short.message);
    }

    #[test]
    fn if_none_match_names_a_revision_quoted_weak_listed_or_any() {
        for held in [
            "\"r1\"",
            "W/\"r1\"",
            "\"r0\", \"r1\"",
            "\"r0\",W/\"r1\"",
            "*",
        ] {
            assert!(names(held, "r1"), "{held}");
        }
        for other in ["\"r0\"", "r1", "\"r1", "", "\"r1\"x", "W/r1", "\"\""] {
            assert!(!names(other, "r1"), "{other}");
        }
    }

    #[test]
    fn counters_queries_name_nodes_or_none() {
        let q = |s: &str| counters_query(&query_pairs(Some(s.to_owned())));
        assert_eq!(q("").unwrap(), None);
        let both = q("node=a&node=b%20c&node=a").unwrap().unwrap();
        assert_eq!(both.into_iter().collect::<Vec<_>>(), ["a", "b c"]);
        let e = q("node=a&link=x").unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn stream_queries_are_checked_with_the_valid_range() {
        let q = |s: &str| stream_query(&query_pairs(Some(s.to_owned())));
        assert_eq!(q("").unwrap(), (1.0, None));
        assert_eq!(q("interval=0.5&count=4").unwrap(), (0.5, Some(4)));
        for bad in [
            "interval=0.01",
            "interval=3601",
            "interval=x",
            "count=0",
            "count=1000001",
            "every=1",
        ] {
            let e = q(bad).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{bad}");
        }
    }
}
