//! The routes of `gpt2 serve` (axum): each reads its request, asks the engine thread, and writes
//! the answer as OpenAI's API (src/openai) or llama.cpp's server (`/tokenize`, `/detokenize`)
//! would. Every failure is OpenAI's error JSON with its status; the counters of `/metrics` see
//! every answer.

use super::engine::{stopping, Engine, Reply};
use super::stats::Stats;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use gpt2_web::openai::{Answer, ApiError, Chunks, CompletionRequest, Head, Logprobs};
use gpt2_web::scheduler::{Completion, Job, Prompt};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc::UnboundedReceiver;

/// The largest request body taken; more is a 413.
pub const MAX_BODY: usize = 1 << 20;
/// Seconds a client refused for a full queue is asked to wait (`Retry-After`).
const RETRY_AFTER: &str = "1";

/// What every route shares.
pub struct App {
    pub engine: Engine,
    pub stats: Arc<Stats>,
    /// The name `/v1/models` lists and the answers carry.
    pub name: String,
    /// When the server started (seconds since 1970): the model's `created`.
    pub started: u64,
    /// Set once a signal asked the server to stop: new requests get a 503.
    pub draining: AtomicBool,
    /// `--api-key`: every route but /health and /metrics then wants `Authorization: Bearer KEY`.
    pub api_key: Option<String>,
    made: AtomicU64,
}

impl App {
    pub fn new(engine: Engine, stats: Arc<Stats>, name: String, api_key: Option<String>) -> Self {
        App {
            engine,
            stats,
            name,
            started: now(),
            draining: AtomicBool::new(false),
            api_key,
            made: AtomicU64::new(0),
        }
    }

    fn head(&self) -> Head {
        let n = self.made.fetch_add(1, Ordering::Relaxed);
        Head {
            id: format!("cmpl-gpt2web-{:x}-{n}", self.started),
            created: now(),
            model: self.name.clone(),
        }
    }
}

fn now() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    t.map_or(0, |d| d.as_secs())
}

type Shared = State<Arc<App>>;

/// Every route, CORS for any origin (the page's API lab, a course page elsewhere), the body
/// limit, and the counting of answers.
pub fn router(app: Arc<App>) -> Router {
    let cors = tower_http::cors::CorsLayer::new()
        .allow_origin(tower_http::cors::Any)
        .allow_methods([Method::GET, Method::POST])
        .allow_headers(tower_http::cors::Any)
        .max_age(std::time::Duration::from_secs(3600));
    Router::new()
        .route("/health", get(health))
        .route("/v1/models", get(models))
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(wrong_method)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn_with_state(app.clone(), auth))
        .layer(axum::middleware::from_fn_with_state(app.clone(), count))
        .layer(cors)
        .with_state(app)
}

/// With `--api-key`, a request without `Authorization: Bearer KEY` is a 401 (OpenAI's
/// `invalid_api_key`); /health and /metrics stay open, for load balancers and Prometheus.
async fn auth(State(app): Shared, req: Request, next: Next) -> Response {
    let Some(key) = app.api_key.as_deref() else {
        return next.run(req).await;
    };
    if matches!(req.uri().path(), "/health" | "/metrics") {
        return next.run(req).await;
    }
    let given = (req.headers().get(header::AUTHORIZATION))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    // Every byte compared, so the time taken does not tell how much of a guess was right.
    let same = given.len() == key.len()
        && (given.bytes().zip(key.bytes())).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0;
    if same {
        return next.run(req).await;
    }
    let msg = "this server wants an API key: send the header `Authorization: Bearer KEY` with the \
               key it was started with (--api-key)";
    Failure(ApiError::new(
        401,
        "invalid_request_error",
        "invalid_api_key",
        msg,
    ))
    .into_response()
}

async fn count(State(app): Shared, req: Request, next: Next) -> Response {
    let res = next.run(req).await;
    app.stats.answered(res.status().as_u16());
    res
}

/// OpenAI's error JSON with its status; a full queue says when to try again.
impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let e = self.0;
        let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut res = (status, axum::Json(e.body())).into_response();
        if e.status == 429 || e.status == 503 {
            let retry = HeaderValue::from_static(RETRY_AFTER);
            res.headers_mut().insert(header::RETRY_AFTER, retry);
        }
        res
    }
}

/// An `ApiError` as an answer.
pub struct Failure(pub ApiError);

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        Failure(e)
    }
}

type Answered = Result<Response, Failure>;

async fn not_found(req: Request) -> Failure {
    let msg = format!(
        "no route {} {}; the routes are GET /health, /v1/models, /metrics and POST \
         /v1/completions, /tokenize, /detokenize",
        req.method(),
        req.uri().path()
    );
    Failure(ApiError::new(404, "not_found_error", "not_found", msg))
}

async fn wrong_method(req: Request) -> Failure {
    let msg = format!("{} does not take {}", req.uri().path(), req.method());
    Failure(ApiError::new(
        405,
        "invalid_request_error",
        "method_not_allowed",
        msg,
    ))
}

async fn chat() -> Failure {
    Failure(ApiError::no_chat())
}

async fn health(State(app): Shared) -> Response {
    match app.draining.load(Ordering::Relaxed) {
        true => Failure(stopping()).into_response(),
        false => axum::Json(json!({ "status": "ok" })).into_response(),
    }
}

async fn models(State(app): Shared) -> Response {
    let model = json!({
        "id": app.name, "object": "model", "created": app.started, "owned_by": "gpt2-web",
        "max_model_len": app.engine.info.n_ctx, "backend": app.engine.info.backend,
    });
    axum::Json(json!({ "object": "list", "data": [model] })).into_response()
}

async fn metrics(State(app): Shared) -> Response {
    let kind = "text/plain; version=0.0.4; charset=utf-8";
    ([(header::CONTENT_TYPE, kind)], app.stats.render()).into_response()
}

/// The body as JSON: over the limit a 413, not JSON a 400.
fn json_body(body: Result<Bytes, BytesRejection>) -> Result<Value, Failure> {
    let bytes = body.map_err(|r| match r.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
            413,
            "invalid_request_error",
            "request_too_large",
            format!("the request body is over {MAX_BODY} bytes"),
        ),
        s => ApiError::invalid(
            None,
            format!("the request body could not be read: {}", r.body_text()),
        )
        .with_status(s.as_u16()),
    })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        Failure(ApiError::invalid(
            None,
            format!("the request body is not JSON: {e}"),
        ))
    })
}

trait WithStatus {
    fn with_status(self, status: u16) -> Self;
}

impl WithStatus for ApiError {
    fn with_status(self, status: u16) -> Self {
        ApiError { status, ..self }
    }
}

/// llama.cpp's server: `{"content": TEXT, "with_pieces": false}` → `{"tokens": [ids]}`, or with
/// pieces `[{"id", "piece"}]`.
async fn tokenize(State(app): Shared, body: Result<Bytes, BytesRejection>) -> Answered {
    let v = json_body(body)?;
    let Some(text) = v.get("content").and_then(Value::as_str) else {
        return Err(
            ApiError::invalid(Some("content"), "content must be the text to tokenize").into(),
        );
    };
    let tok = &app.engine.info.tokenizer;
    let ids = tok.encode(text).map_err(ApiError::from)?;
    let tokens: Vec<Value> = match v.get("with_pieces").and_then(Value::as_bool) {
        Some(true) => (ids.iter())
            .map(|&id| json!({ "id": id, "piece": tok.decode(&[id]) }))
            .collect(),
        _ => ids.iter().map(|&id| json!(id)).collect(),
    };
    Ok(axum::Json(json!({ "tokens": tokens })).into_response())
}

/// llama.cpp's server: `{"tokens": [ids]}` → `{"content": TEXT}`.
async fn detokenize(State(app): Shared, body: Result<Bytes, BytesRejection>) -> Answered {
    let v = json_body(body)?;
    let tok = &app.engine.info.tokenizer;
    let vocab = tok.vocab_size() as u64;
    let ids: Option<Vec<u32>> = (v.get("tokens").and_then(Value::as_array)).and_then(|a| {
        (a.iter())
            .map(|x| x.as_u64().filter(|&id| id < vocab).map(|id| id as u32))
            .collect()
    });
    let Some(ids) = ids else {
        let msg = format!("tokens must be a list of token ids below {vocab}");
        return Err(ApiError::invalid(Some("tokens"), msg).into());
    };
    Ok(axum::Json(json!({ "content": tok.decode(&ids) })).into_response())
}

/// `POST /v1/completions`: the request read (src/openai), queued on the engine, answered whole
/// or as a stream of server-sent events. A stream starts once the first token is made, so a
/// request the engine refuses when its turn comes (a prompt longer than the context) is still a
/// 400 with its error JSON.
async fn completions(State(app): Shared, body: Result<Bytes, BytesRejection>) -> Answered {
    let arrived = Instant::now();
    if app.draining.load(Ordering::Relaxed) {
        return Err(stopping().into());
    }
    let req = CompletionRequest::from_json(&json_body(body)?)?;
    let echo = req.echo.then(|| match &req.prompt {
        Prompt::Text(t) => t.clone(),
        Prompt::Ids(ids) => app.engine.info.tokenizer.decode(ids),
    });
    let n = req.params.n;
    let job = Job::Generate {
        prompt: req.prompt.clone(),
        params: req.params.clone(),
        draft: None,
    };
    let mut replies = app.engine.submit(job).await?;
    let first = replies.recv().await.ok_or_else(stopping)?;
    if let Reply::Failed(e) = first {
        return Err(ApiError::from(e).into());
    }
    if matches!(first, Reply::Token { .. }) {
        app.stats.first_token(arrived.elapsed().as_secs_f64());
    }
    let head = app.head();
    if !req.stream {
        return whole(&app, head, &req, echo, n, first, replies).await;
    }
    let mut chunks = Chunks::new(head, req.logprobs, req.include_usage);
    let mut lead: Vec<Bytes> = match &echo {
        Some(text) => (0..n).map(|i| event(&chunks.echo(i, text))).collect(),
        None => Vec::new(),
    };
    let tok = app.engine.info.tokenizer.clone();
    let done = lead_of(first, &mut chunks, &tok, &mut lead);
    let stream = Sse {
        replies,
        chunks,
        tok,
        queue: lead.into(),
        done,
    };
    let body = Body::from_stream(futures_util::stream::unfold(stream, |mut s| async move {
        s.next()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), s))
    }));
    let headers = [
        (header::CONTENT_TYPE, "text/event-stream"),
        (header::CACHE_CONTROL, "no-cache"),
    ];
    Ok((headers, body).into_response())
}

/// A whole answer: every reply gathered (the tokens' logprobs, when asked for), then the
/// completion.
async fn whole(
    app: &App,
    head: Head,
    req: &CompletionRequest,
    echo: Option<String>,
    n: usize,
    first: Reply,
    mut replies: UnboundedReceiver<Reply>,
) -> Answered {
    let tok = &app.engine.info.tokenizer;
    let mut logprobs: Vec<Logprobs> = vec![Logprobs::new(req.logprobs.unwrap_or(0)); n.max(1)];
    let mut next = Some(first);
    let completion: Box<Completion> = loop {
        match next.take() {
            Some(Reply::Token { choice, event }) => {
                if let Some(l) = logprobs.get_mut(choice).filter(|_| req.logprobs.is_some()) {
                    l.push(&event, tok);
                }
            }
            Some(Reply::Done(c)) => break c,
            Some(Reply::Failed(e)) => return Err(ApiError::from(e).into()),
            None => return Err(stopping().into()),
        }
        next = replies.recv().await;
    };
    let answer = Answer {
        head: &head,
        echo: echo.as_deref(),
        logprobs: req.logprobs.map(|_| logprobs.as_slice()),
    };
    Ok(axum::Json(answer.to_json(&completion)).into_response())
}

/// One server-sent event.
fn event(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

/// The first reply into the stream's first events; true when it ended the request.
fn lead_of(
    first: Reply,
    chunks: &mut Chunks,
    tok: &gpt2_web::Tokenizer,
    out: &mut Vec<Bytes>,
) -> bool {
    match first {
        Reply::Token { choice, event: ev } => {
            out.push(event(&chunks.token(choice, &ev, tok)));
            false
        }
        Reply::Done(c) => {
            out.extend(chunks.finish(&c).iter().map(event));
            out.push(Bytes::from_static(b"data: [DONE]\n\n"));
            true
        }
        Reply::Failed(e) => {
            out.push(event(&ApiError::from(e).body()));
            out.push(Bytes::from_static(b"data: [DONE]\n\n"));
            true
        }
    }
}

/// A stream's state: the request's replies become events, queued until sent. Dropped when the
/// client hangs up, which drops `replies`: the engine ends the request before its next step.
struct Sse {
    replies: UnboundedReceiver<Reply>,
    chunks: Chunks,
    tok: Arc<gpt2_web::Tokenizer>,
    queue: std::collections::VecDeque<Bytes>,
    done: bool,
}

impl Sse {
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(b) = self.queue.pop_front() {
                return Some(b);
            }
            if self.done {
                return None;
            }
            let reply = self
                .replies
                .recv()
                .await
                .unwrap_or(Reply::Failed(gpt2_web::Error::State(
                    "the server is shutting down".into(),
                )));
            let mut out = Vec::new();
            self.done = lead_of(reply, &mut self.chunks, &self.tok, &mut out);
            self.queue.extend(out);
        }
    }
}
