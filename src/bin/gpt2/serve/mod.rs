//! `gpt2 serve`: an OpenAI-compatible HTTP server on the engine — `GET /v1/models`, `POST
//! /v1/completions` (whole or streamed as server-sent events), `GET /health`, `GET /metrics`
//! (Prometheus), llama.cpp's `POST /tokenize` and `/detokenize` — for a classroom on a LAN or a
//! laptop serving phones. Requests from every client join one running batch between two model
//! steps (the scheduler's continuous batching, `engine.rs`); the routes only read requests and
//! write answers (`http.rs`, src/openai). On SIGTERM or Ctrl-C it stops accepting, lets running
//! requests finish for up to `DRAIN` and ends the rest, then exits.

#[path = "engine.rs"]
mod engine;
#[path = "http.rs"]
mod http;
#[path = "stats.rs"]
mod stats;

use crate::inputs::ModelArgs;
use crate::{CliResult, Fail};
use clap::Args;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long running requests may go on once a signal asked the server to stop.
const DRAIN: Duration = Duration::from_secs(5);
/// When the process exits after a signal, whatever is still open.
const EXIT: Duration = Duration::from_secs(9);

#[derive(Args)]
pub struct ServeCmd {
    #[command(flatten)]
    model: ModelArgs,
    /// The address to listen on (0.0.0.0: every interface, e.g. a classroom's LAN)
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// The port (0: any free one; the line on stdout says which). 8000, as vLLM's: the page's
    /// own server (`./build.sh serve`) takes 8080
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// The name /v1/models lists and answers carry (default: the model's folder or file name)
    #[arg(long, value_name = "NAME")]
    alias: Option<String>,
    /// The most sequences that may wait for a place in the batch (each choice of n counts);
    /// more are answered 429 with Retry-After
    #[arg(long, value_name = "N", default_value_t = gpt2_web::scheduler::MAX_QUEUE)]
    queue: usize,
    /// Answer only requests with `Authorization: Bearer KEY` (/health and /metrics stay open);
    /// also read from GPT2_API_KEY
    #[arg(long, value_name = "KEY", env = "GPT2_API_KEY")]
    api_key: Option<String>,
}

/// The model's name: `--alias`, else the folder's or file's name, else `--model` as given (a
/// name in the Hugging Face cache).
fn name_of(cmd: &ServeCmd) -> String {
    let given = &cmd.model.model;
    let stem = given.file_stem().map(|s| s.to_string_lossy().into_owned());
    (cmd.alias.clone())
        .or(stem.filter(|_| given.exists()))
        .unwrap_or_else(|| given.display().to_string())
}

pub fn serve(cmd: &ServeCmd) -> CliResult<()> {
    if cmd.queue == 0 || cmd.queue > gpt2_web::scheduler::MAX_QUEUE {
        let max = gpt2_web::scheduler::MAX_QUEUE;
        return Err(crate::usage(format!(
            "--queue {}: give 1 to {max}",
            cmd.queue
        )));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Fail(1, format!("cannot start the server's runtime: {e}")))?;
    let stats = Arc::new(stats::Stats::default());
    let engine = engine::Engine::start(cmd.model.clone(), cmd.queue, stats.clone())?;
    let backend = engine.info.backend.clone();
    let key = cmd.api_key.clone().filter(|k| !k.is_empty());
    let app = Arc::new(http::App::new(engine, stats, name_of(cmd), key));
    let addr = format!("{}:{}", cmd.host, cmd.port);
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(&addr))
        .map_err(|e| Fail(1, format!("cannot listen on {addr}: {e}")))?;
    let local = listener.local_addr().map_err(|e| Fail(1, e.to_string()))?;
    crate::emit(format!(
        "gpt2 serve: {} on {backend} at http://{local}/v1 (Ctrl-C stops)",
        app.name
    ))?;
    let router = http::router(app.clone());
    let stop = {
        let app = app.clone();
        async move {
            signal().await;
            eprintln!("gpt2 serve: stopping; running requests have {DRAIN:?} to finish");
            app.draining.store(true, Ordering::Relaxed);
            app.engine.drain(Instant::now() + DRAIN);
            std::thread::spawn(|| {
                std::thread::sleep(EXIT);
                eprintln!("gpt2 serve: still open after {EXIT:?}; exiting");
                std::process::exit(0);
            });
        }
    };
    let served = rt.block_on(async {
        axum::serve(listener, router)
            .with_graceful_shutdown(stop)
            .await
    });
    drop(rt);
    if let Ok(app) = Arc::try_unwrap(app) {
        app.engine.join();
    }
    served.map_err(|e| Fail(1, format!("the server failed: {e}")))
}

/// SIGTERM, or Ctrl-C.
async fn signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            },
            Err(_) => drop(tokio::signal::ctrl_c().await),
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}
