//! A separate signing process (`resolvd signer`): it holds the BLS keystore
//! and the slashing-protection store and signs `VerdictCommitment` digests,
//! only for the escrow domains it is configured for, over a local HTTP API
//! authenticated by a bearer token. The protection check and its fsync happen
//! here, so several daemons (a fail-over pair) can share one signer and still
//! never obtain two different signatures for one deal.
//!
//! API (every request needs `Authorization: Bearer <token>`):
//! - `GET /v1/public-key` → `{"publicKey": "0x…48 bytes"}`
//! - `POST /v1/sign` with `{"domain": VerdictDomain, "commitment":
//!   VerdictCommitment, "commit"?: {"epoch", "signerIndex"}}` →
//!   `{"signature": "0x…96 bytes", "commitSignature"?: "0x…96 bytes"}`
//!   (with `commit`, also the commit-reveal commitment to the partial just
//!   signed, under the commitment DST: never a verdict signature); `401` without a
//!   valid token, `403` for a domain not configured, `409` when slashing
//!   protection refuses (a different commitment was signed for the deal).

use crate::store::{SharedStore, Store};
use alloy_primitives::{hex, Address};
use axum::{
    extract::State,
    http::{HeaderMap, StatusCode},
    routing::{get, post},
    Json, Router,
};
use resolvd_consensus::{protection::ProtectedSigner, PublicKey, SecretKey, Signature};
use resolvd_proto::{VerdictCommitment, VerdictDomain};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use tracing::{info, warn};
use zeroize::Zeroizing;

/// A signing request.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SignRequest {
    /// The escrow's domain.
    pub domain: VerdictDomain,
    /// What to sign.
    pub commitment: VerdictCommitment,
    /// Also sign the commit-reveal commitment to the partial, as this
    /// member of this epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<CommitTo>,
}

/// Whose commitment to sign with the partial ([`SignRequest::commit`]).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommitTo {
    /// The dispute's epoch.
    pub epoch: u64,
    /// The signer's index in it.
    pub signer_index: u32,
}

struct Signer {
    token: Zeroizing<String>,
    domains: Vec<(u64, Address)>,
    public_key: PublicKey,
    signer: Mutex<ProtectedSigner<SharedStore>>,
}

/// Compares in time independent of where the strings differ.
fn same_token(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

fn authorized(
    s: &Signer,
    headers: &HeaderMap,
) -> Result<(), (StatusCode, Json<serde_json::Value>)> {
    let given = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(t) if same_token(t.as_bytes(), s.token.as_bytes()) => Ok(()),
        _ => {
            warn!(target: "signer", "unauthenticated request refused");
            Err(error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token".into()))
        }
    }
}

fn error(status: StatusCode, message: String) -> (StatusCode, Json<serde_json::Value>) {
    (status, Json(serde_json::json!({ "error": message })))
}

type Reply = Result<Json<serde_json::Value>, (StatusCode, Json<serde_json::Value>)>;

async fn get_public_key(State(s): State<Arc<Signer>>, headers: HeaderMap) -> Reply {
    authorized(&s, &headers)?;
    Ok(Json(serde_json::json!({ "publicKey": hex::encode_prefixed(s.public_key.compress()) })))
}

async fn sign(
    State(s): State<Arc<Signer>>,
    headers: HeaderMap,
    Json(req): Json<SignRequest>,
) -> Reply {
    authorized(&s, &headers)?;
    let d = &req.domain;
    let allowed = d.name == "resolvd"
        && d.version == "1"
        && s.domains.contains(&(d.chain_id, d.verifying_contract));
    if !allowed {
        warn!(target: "signer", chain_id = d.chain_id, escrow = %d.verifying_contract, "domain not configured: refused");
        return Err(error(
            StatusCode::FORBIDDEN,
            format!("domain {}:{} is not configured (--domain)", d.chain_id, d.verifying_contract),
        ));
    }
    let deal = req.commitment.deal_id;
    // The protection check, its fsync and the signature, under one lock.
    let signed = tokio::task::block_in_place(|| {
        let mut signer = s.signer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let sig = signer.sign(&req.domain, &req.commitment)?;
        // Only a commitment to the partial just signed (under protection).
        let commit = req.commit.map(|c| {
            signer.sign_commit(&crate::node::commit_message(
                deal,
                c.epoch,
                c.signer_index,
                &sig.compress(),
            ))
        });
        Ok::<_, resolvd_consensus::Error>((sig, commit))
    });
    match signed {
        Ok((sig, commit)) => {
            info!(target: "signer", %deal, escrow = %d.verifying_contract, "signed");
            let mut body = serde_json::json!({ "signature": hex::encode_prefixed(sig.compress()) });
            if let Some(c) = commit {
                body["commitSignature"] = hex::encode_prefixed(c.compress()).into();
            }
            Ok(Json(body))
        }
        Err(e @ resolvd_consensus::Error::SlashingProtection { .. }) => {
            warn!(target: "signer", %deal, error = %e, "slashing protection refused");
            Err(error(StatusCode::CONFLICT, e.to_string()))
        }
        Err(e) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
    }
}

/// Serves the signer on `listener` until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    secret: SecretKey,
    store: Arc<Store>,
    token: Zeroizing<String>,
    domains: Vec<(u64, Address)>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> eyre::Result<()> {
    eyre::ensure!(!token.trim().is_empty(), "the signer token is empty");
    eyre::ensure!(
        !domains.is_empty(),
        "no --domain configured: the signer would refuse everything"
    );
    let public_key = secret.public_key();
    let state = Arc::new(Signer {
        token,
        domains,
        public_key,
        signer: Mutex::new(ProtectedSigner::new(secret, SharedStore(store))),
    });
    let app = Router::new()
        .route("/v1/public-key", get(get_public_key))
        .route("/v1/sign", post(sign))
        .with_state(state);
    info!(target: "signer", addr = %listener.local_addr()?, key = %hex::encode_prefixed(public_key.compress()), "signer listening");
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await?;
    Ok(())
}

/// Why a remote signature was not obtained.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// Slashing protection (in the signer) refused: never retried.
    #[error("the signer's slashing protection refused: {0}")]
    Refused(String),
    /// Anything else (unreachable, unauthorised, bad answer): retried.
    #[error("remote signer: {0}")]
    Failed(String),
}

/// The daemon's side of `resolvd run --signer URL`.
#[derive(Clone, Debug)]
pub struct RemoteSigner {
    url: String,
    token: Arc<Zeroizing<String>>,
    client: reqwest::Client,
}

impl RemoteSigner {
    /// A client of the signer at `url` (e.g. `http://127.0.0.1:9600`).
    pub fn new(url: &str, token: Zeroizing<String>) -> eyre::Result<Self> {
        let client =
            reqwest::Client::builder().timeout(std::time::Duration::from_secs(10)).build()?;
        Ok(Self { url: url.trim_end_matches('/').to_owned(), token: Arc::new(token), client })
    }

    async fn call(&self, req: reqwest::RequestBuilder) -> Result<serde_json::Value, RemoteError> {
        let resp = req
            .bearer_auth(self.token.as_str())
            .send()
            .await
            .map_err(|e| RemoteError::Failed(e.to_string()))?;
        let status = resp.status();
        let body: serde_json::Value =
            resp.json().await.map_err(|e| RemoteError::Failed(e.to_string()))?;
        let message = || body["error"].as_str().unwrap_or("no message").to_owned();
        match status {
            s if s.is_success() => Ok(body),
            StatusCode::CONFLICT => Err(RemoteError::Refused(message())),
            s => Err(RemoteError::Failed(format!("{s}: {}", message()))),
        }
    }

    /// The signer's public key.
    pub async fn public_key(&self) -> Result<PublicKey, RemoteError> {
        let body = self.call(self.client.get(format!("{}/v1/public-key", self.url))).await?;
        let bytes = body["publicKey"]
            .as_str()
            .and_then(|h| hex::decode(h).ok())
            .ok_or_else(|| RemoteError::Failed("no publicKey".into()))?;
        PublicKey::from_compressed(&bytes).map_err(|e| RemoteError::Failed(e.to_string()))
    }

    /// Signs `commitment` under `domain`, and with `commit` (epoch, signer
    /// index) the commit-reveal commitment to the partial; the answers are
    /// checked against `key`.
    pub async fn sign(
        &self,
        domain: &VerdictDomain,
        commitment: &VerdictCommitment,
        key: &PublicKey,
        commit: Option<(u64, u32)>,
    ) -> Result<(Signature, Option<Signature>), RemoteError> {
        let req = SignRequest {
            domain: domain.clone(),
            commitment: *commitment,
            commit: commit.map(|(epoch, signer_index)| CommitTo { epoch, signer_index }),
        };
        let body = self.call(self.client.post(format!("{}/v1/sign", self.url)).json(&req)).await?;
        let bytes = body["signature"]
            .as_str()
            .and_then(|h| hex::decode(h).ok())
            .ok_or_else(|| RemoteError::Failed("no signature".into()))?;
        let sig =
            Signature::from_compressed(&bytes).map_err(|e| RemoteError::Failed(e.to_string()))?;
        sig.verify(key, &commitment.eip712_digest(domain)).map_err(|e| {
            RemoteError::Failed(format!("the signer's signature does not verify: {e}"))
        })?;
        let Some((epoch, index)) = commit else { return Ok((sig, None)) };
        let bytes = body["commitSignature"]
            .as_str()
            .and_then(|h| hex::decode(h).ok())
            .ok_or_else(|| RemoteError::Failed("no commitSignature".into()))?;
        let c =
            Signature::from_compressed(&bytes).map_err(|e| RemoteError::Failed(e.to_string()))?;
        let message =
            crate::node::commit_message(commitment.deal_id, epoch, index, &sig.compress());
        c.verify_commit(key, &message).map_err(|e| {
            RemoteError::Failed(format!("the signer's commitment signature does not verify: {e}"))
        })?;
        Ok((sig, Some(c)))
    }
}
