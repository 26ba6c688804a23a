//! One app-server process inside an environment, talked to through `driver::rpc`, recording
//! every line sent so a user can replay them by hand.

use anyhow::{Context, Result};
use driver::rpc::{Limits, RpcClient, RpcError};
use sandbox::launcher::{Launcher, ProcessSpec};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// Bound on one request (thread/start under a failing sandbox answers within a second or two;
/// the container start is included in the first).
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(90);
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Session {
    client: RpcClient,
    /// Requests and notifications sent, as JSON lines.
    pub(crate) sent: Vec<String>,
    next_id: i64,
}

impl Session {
    /// Start the process and run `initialize` (with the experimental API, which
    /// `permissions` on thread/start needs) and `initialized`.
    pub async fn start(
        launcher: &dyn Launcher,
        process: &ProcessSpec,
        stderr_log: &Path,
    ) -> Result<Self> {
        let client = RpcClient::spawn(launcher, process, stderr_log, Limits::default())?;
        let mut session = Session {
            client,
            sent: Vec::new(),
            next_id: 1,
        };
        session
            .request(
                "initialize",
                json!({
                    "clientInfo": {"name": "harness-repro", "version": env!("CARGO_PKG_VERSION")},
                    "capabilities": {"experimentalApi": true}
                }),
            )
            .await?
            .map_err(|err| anyhow::anyhow!("initialize was refused: {err}"))?;
        session
            .sent
            .push(json!({"method": "initialized"}).to_string());
        session
            .client
            .notify("initialized", None)
            .await
            .context("sending initialized")?;
        Ok(session)
    }

    pub async fn request(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<Result<Value, RpcError>> {
        // The client numbers its own requests from 1 in order; the recorded lines use the same ids.
        self.sent
            .push(json!({"id": self.next_id, "method": method, "params": params}).to_string());
        self.next_id += 1;
        self.client
            .request(method, params, REQUEST_TIMEOUT)
            .await
            .with_context(|| format!("waiting for the answer to {method}"))
    }

    pub async fn close(self) {
        let _ = self.client.shutdown(SHUTDOWN_TIMEOUT).await;
    }
}
