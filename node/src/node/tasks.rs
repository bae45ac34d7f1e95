//! The node's long-running background loops (chain watcher, fee ledger,
//! balance refresh): named, watched by the event loop, and aborted and
//! awaited when the node stops, so a stopped node leaves nothing running
//! against its store or its RPC endpoints. One-shot IO (a confirmation, a
//! replay, a transaction) is spawned on its own and answers through the
//! loop's channel.

use std::future::Future;
use tokio::task::{JoinError, JoinSet};

/// The background loops of one node.
#[derive(Default)]
pub(crate) struct TaskSet(JoinSet<&'static str>);

impl TaskSet {
    /// Runs `task` until it ends or the set is shut down.
    pub(crate) fn spawn(
        &mut self,
        name: &'static str,
        task: impl Future<Output = ()> + Send + 'static,
    ) {
        self.0.spawn(async move {
            task.await;
            name
        });
    }

    /// The next loop that ended (they run for the node's lifetime: an end
    /// is a failure the node does not survive). Pending while none did.
    pub(crate) async fn ended(&mut self) -> Result<&'static str, JoinError> {
        match self.0.join_next().await {
            Some(r) => r,
            None => std::future::pending().await,
        }
    }

    /// Aborts every loop and waits until they are gone.
    pub(crate) async fn shutdown(&mut self) {
        self.0.shutdown().await;
    }

    /// Loops running.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    };

    struct Flag(Arc<AtomicBool>);

    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn shutdown_stops_every_loop_and_an_ended_loop_is_reported() {
        let mut tasks = TaskSet::default();
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = Flag(dropped.clone());
        tasks.spawn("forever", async move {
            let _flag = flag;
            std::future::pending::<()>().await;
        });
        tasks.spawn("short", async {});
        assert_eq!(tasks.ended().await.unwrap(), "short");
        assert_eq!(tasks.len(), 1);
        tasks.shutdown().await;
        assert_eq!(tasks.len(), 0);
        assert!(dropped.load(Ordering::SeqCst), "the loop's state was dropped");
    }
}
