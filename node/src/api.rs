//! The HTTP API (axum): health, status, disputes, content, metrics.
//!
//! | route | |
//! | --- | --- |
//! | `GET /health` | `200 ok` while the event loop publishes status |
//! | `GET /status` | peers (with gossip scores), chain head and cursor, epoch, disputes |
//! | `GET /disputes/{dealId}` | one dispute's view (404 if unknown) |
//! | `PUT /content/{hash}?type=<tag>` | stores the body only if it hashes to `hash` under `tag` (201; 400 otherwise) |
//! | `GET /content/{hash}` | the bytes (`x-resolvd-type-tag` header), 404 if absent |
//! | `GET /metrics` | Prometheus / OpenMetrics text |

use crate::{node::Shared, store::StoreError};
use alloy_primitives::B256;
use axum::{
    body::Bytes,
    extract::{DefaultBodyLimit, Path, Query, State},
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Json, Router,
};
use std::{net::SocketAddr, sync::Arc};

/// The router.
pub fn router(shared: Arc<Shared>, max_content_len: usize) -> Router {
    Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/status", get(status))
        .route("/disputes/{deal_id}", get(dispute))
        .route("/content/{hash}", get(get_content).put(put_content))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(max_content_len))
        .with_state(shared)
}

/// Serves the API on `addr` until `shutdown`.
pub async fn serve(
    shared: Arc<Shared>,
    addr: SocketAddr,
    max_content_len: usize,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> eyre::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| eyre::eyre!("api.listen {addr}: {e}"))?;
    tracing::info!(target: "api", %addr, "HTTP API listening");
    axum::serve(listener, router(shared, max_content_len)).with_graceful_shutdown(shutdown).await?;
    Ok(())
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": message.into() }))).into_response()
}

async fn status(State(s): State<Arc<Shared>>) -> Response {
    let status = s.status.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    Json(status).into_response()
}

fn parse_hash(text: &str) -> Result<B256, Box<Response>> {
    text.parse().map_err(|_| {
        Box::new(error(StatusCode::BAD_REQUEST, format!("not a 32-byte hex hash: {text}")))
    })
}

async fn dispute(State(s): State<Arc<Shared>>, Path(deal_id): Path<String>) -> Response {
    let deal_id = match parse_hash(&deal_id) {
        Ok(h) => h,
        Err(r) => return *r,
    };
    let status = s.status.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    match status.disputes.get(&deal_id) {
        Some(d) => Json(d.clone()).into_response(),
        None => error(StatusCode::NOT_FOUND, format!("no dispute {deal_id}")),
    }
}

#[derive(serde::Deserialize)]
struct TypeQuery {
    #[serde(rename = "type")]
    type_tag: String,
}

async fn put_content(
    State(s): State<Arc<Shared>>,
    Path(hash): Path<String>,
    Query(q): Query<TypeQuery>,
    body: Bytes,
) -> Response {
    let hash = match parse_hash(&hash) {
        Ok(h) => h,
        Err(r) => return *r,
    };
    let store = s.store.clone();
    let tag = q.type_tag.clone();
    let result =
        tokio::task::spawn_blocking(move || store.put_content_expecting(&tag, &body, &hash)).await;
    match result {
        Ok(Ok(())) => {
            let _ = s.content_added.send(hash);
            tracing::info!(target: "api", %hash, type_tag = %q.type_tag, "content stored");
            (StatusCode::CREATED, Json(serde_json::json!({ "hash": hash }))).into_response()
        }
        Ok(Err(e @ (StoreError::HashMismatch { .. } | StoreError::UnknownTypeTag(_)))) => {
            tracing::warn!(target: "api", %hash, error = %e, "content refused");
            error(StatusCode::BAD_REQUEST, e.to_string())
        }
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn get_content(State(s): State<Arc<Shared>>, Path(hash): Path<String>) -> Response {
    let hash = match parse_hash(&hash) {
        Ok(h) => h,
        Err(r) => return *r,
    };
    match s.store.get_content(&hash) {
        Ok(Some((tag, bytes))) => (
            [
                (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
                (header::HeaderName::from_static("x-resolvd-type-tag"), tag),
            ],
            bytes,
        )
            .into_response(),
        Ok(None) => error(StatusCode::NOT_FOUND, format!("no content {hash}")),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn metrics(State(s): State<Arc<Shared>>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        s.metrics.render(),
    )
        .into_response()
}
