//! The HTTP servers' accept loop (the API and the remote signer): a
//! connection limit and a header-read timer on hyper's HTTP/1, over TCP or a
//! Unix socket.

use axum::Router;
use std::{sync::Arc, time::Duration};
use tokio::sync::{Notify, Semaphore};

/// Where [`accept_loop`] takes connections from.
#[derive(Debug)]
pub enum Listener {
    /// A TCP socket.
    Tcp(tokio::net::TcpListener),
    /// A Unix socket: only local users the file's mode admits can connect.
    Unix(tokio::net::UnixListener),
}

/// A connection's byte stream, either kind.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Io for T {}

impl Listener {
    async fn accept(&self) -> std::io::Result<(Box<dyn Io>, String)> {
        match self {
            Self::Tcp(l) => {
                l.accept().await.map(|(s, a)| (Box::new(s) as Box<dyn Io>, a.to_string()))
            }
            Self::Unix(l) => {
                l.accept().await.map(|(s, _)| (Box::new(s) as Box<dyn Io>, "unix".into()))
            }
        }
    }
}

/// The accept loop's bounds.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Open connections at once; more are closed on accept.
    pub max_connections: usize,
    /// Time a connection may take to send a request's headers, also while
    /// idle between keep-alive requests; then it is closed.
    pub header_timeout: Duration,
}

/// The connection a request came over (a request extension set by
/// [`accept_loop`]): [`ConnectionCut::cut`] closes it at once, whatever it is
/// doing (e.g. waiting for a client that does not read its response).
#[derive(Clone, Debug)]
pub struct ConnectionCut(Arc<Notify>);

impl ConnectionCut {
    /// Closes the connection.
    pub fn cut(&self) {
        self.0.notify_one();
    }
}

/// Serves `router` on `listener` until `shutdown`: at most
/// `limits.max_connections` connections at once (more are closed on accept),
/// each closed when a request's headers take longer than
/// `limits.header_timeout` (idle keep-alive and slowloris connections); then
/// lets requests in flight finish (5 s at most). `name` is logged.
pub async fn accept_loop(
    name: &'static str,
    listener: &Listener,
    router: Router,
    limits: Limits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> eyre::Result<()> {
    // Not `axum::serve`: it sets no header-read timer (idle connections stay
    // open forever) and accepts without limit.
    let max = limits.max_connections.clamp(1, Semaphore::MAX_PERMITS);
    let header_timeout = limits.header_timeout;
    let open = Arc::new(Semaphore::new(max));
    let (stop, stopped) = tokio::sync::watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(target: "api", server = name, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = open.clone().try_acquire_owned() else {
            tracing::debug!(target: "api", server = name, %peer, max, "connection closed: max_connections open");
            continue;
        };
        let router = router.clone();
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let cut = Arc::new(Notify::new());
            let handle = ConnectionCut(cut.clone());
            let service = hyper::service::service_fn(
                move |mut req: hyper::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(handle.clone());
                    let mut router = router.clone();
                    async move { tower::Service::call(&mut router, req).await }
                },
            );
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(header_timeout);
            let conn = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            let mut conn = std::pin::pin!(conn);
            let result = tokio::select! {
                r = conn.as_mut() => r,
                _ = stopped.changed() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
                () = cut.notified() => {
                    tracing::debug!(target: "api", server = name, %peer, "connection cut");
                    return;
                }
            };
            if let Err(e) = result {
                tracing::trace!(target: "api", server = name, %peer, error = %e, "connection ended");
            }
        });
    }
    drop(stop);
    // Let requests in flight finish (bounded), then return.
    let _ = tokio::time::timeout(Duration::from_secs(5), open.acquire_many(max as u32)).await;
    Ok(())
}
