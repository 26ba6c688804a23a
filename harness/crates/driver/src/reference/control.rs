//! What the driver can be told while it runs, beside its task: interrupt the running turn
//! (`interrupt = "sigint"`: SIGINT to the driver's process) and steer it with more input
//! (`steer = "stdin-line"`: one line on the driver's stdin). Either may arrive at any moment. A
//! turn acts on it as soon as it knows its own id (so a request that arrives while `turn/start`
//! is still unanswered waits for the answer); an interrupt that arrives between turns keeps the
//! next turn from starting; a steer that arrives between turns steers the next one.

use std::collections::VecDeque;
use tokio::sync::mpsc;

/// One request from outside the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Control {
    /// Interrupt the running turn (`turn/interrupt`), keep the session, end the run interrupted.
    Interrupt,
    /// Add this text to the running turn (`turn/steer`).
    Steer(String),
}

/// The controls a run listens to, and those it was sent but has not acted on yet.
#[derive(Debug, Default)]
pub(crate) struct Controls {
    incoming: Option<mpsc::UnboundedReceiver<Control>>,
    interrupt: bool,
    steers: VecDeque<String>,
}

impl Controls {
    /// A run nobody can control (the in-process runs of the harness's own tests and tools).
    pub(crate) fn none() -> Self {
        Self::default()
    }

    /// A run controlled through `incoming`.
    pub(crate) fn new(incoming: mpsc::UnboundedReceiver<Control>) -> Self {
        Self {
            incoming: Some(incoming),
            ..Self::default()
        }
    }

    fn note(&mut self, control: Control) {
        match control {
            Control::Interrupt => self.interrupt = true,
            Control::Steer(text) => self.steers.push_back(text),
        }
    }

    /// Take in every control already sent, without waiting.
    pub(crate) fn poll(&mut self) {
        while let Some(rx) = self.incoming.as_mut() {
            match rx.try_recv() {
                Ok(control) => self.note(control),
                Err(mpsc::error::TryRecvError::Empty) => return,
                Err(mpsc::error::TryRecvError::Disconnected) => self.incoming = None,
            }
        }
    }

    /// Wait until a control arrives and take it in; never returns when none can come any more.
    /// Cancel-safe: a control is taken in whole or left in the channel.
    pub(crate) async fn arrived(&mut self) {
        loop {
            let Some(rx) = self.incoming.as_mut() else {
                return std::future::pending().await;
            };
            match rx.recv().await {
                Some(control) => return self.note(control),
                None => self.incoming = None,
            }
        }
    }

    /// Whether the run was asked to interrupt (it stays asked: the run ends interrupted).
    pub(crate) fn interrupt_requested(&self) -> bool {
        self.interrupt
    }

    /// The steering texts not yet sent, in the order they came.
    pub(crate) fn take_steers(&mut self) -> Vec<String> {
        self.steers.drain(..).collect()
    }
}

/// Longest steering line read from stdin; a longer one ends the reading (said on stderr).
const MAX_STEER_LINE_BYTES: usize = 64 * 1024;

/// The controls of a `harness drive` process: every SIGINT is an interrupt, every non-empty
/// line of its stdin a steer. Must be called inside a Tokio runtime.
pub(crate) fn from_process() -> std::io::Result<mpsc::UnboundedReceiver<Control>> {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let signals = tx.clone();
    tokio::spawn(async move {
        while sigint.recv().await.is_some() {
            if signals.send(Control::Interrupt).is_err() {
                return;
            }
        }
    });
    // A plain thread, not Tokio's stdin: a read pending on a stdin nobody closes would keep the
    // runtime from shutting down at the end of the run.
    std::thread::Builder::new()
        .name("drive-stdin".into())
        .spawn(move || read_steers(std::io::stdin().lock(), &tx))?;
    Ok(rx)
}

/// Send each non-empty line of `input` as a steer, until its end, a line over the bound, or a
/// run that no longer listens.
fn read_steers(mut input: impl std::io::BufRead, tx: &mpsc::UnboundedSender<Control>) {
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut limited = std::io::Read::take(&mut input, MAX_STEER_LINE_BYTES as u64 + 1);
        match std::io::BufRead::read_until(&mut limited, b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line.len() > MAX_STEER_LINE_BYTES => {
                tracing::warn!(target: "notice",
                    "harness drive: a stdin line is longer than {MAX_STEER_LINE_BYTES} bytes; no more steering is read"
                );
                return;
            }
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            continue;
        }
        if tx.send(Control::Steer(text.to_string())).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn controls_are_kept_until_acted_on_and_a_closed_channel_waits_forever() {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut controls = Controls::new(rx);
        tx.send(Control::Steer("one".into())).unwrap();
        tx.send(Control::Interrupt).unwrap();
        tx.send(Control::Steer("two".into())).unwrap();
        controls.poll();
        assert!(controls.interrupt_requested());
        assert_eq!(controls.take_steers(), ["one", "two"]);
        assert!(controls.take_steers().is_empty());
        tx.send(Control::Steer("three".into())).unwrap();
        controls.arrived().await;
        assert_eq!(controls.take_steers(), ["three"]);
        drop(tx);
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(50), controls.arrived()).await;
        assert!(waited.is_err(), "nothing can arrive any more");
        assert!(controls.interrupt_requested(), "an interrupt stays asked");
    }

    #[test]
    fn stdin_lines_become_steers_and_a_line_over_the_bound_ends_the_reading() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let long = "x".repeat(MAX_STEER_LINE_BYTES + 1);
        let input = format!("first\r\n\n   \nsecond\n{long}\nnever read\n");
        read_steers(std::io::Cursor::new(input), &tx);
        let mut got = Vec::new();
        while let Ok(c) = rx.try_recv() {
            got.push(c);
        }
        assert_eq!(
            got,
            [
                Control::Steer("first".into()),
                Control::Steer("second".into())
            ]
        );
        let (tx, mut rx) = mpsc::unbounded_channel();
        read_steers(std::io::Cursor::new("no newline at the end"), &tx);
        assert_eq!(
            rx.try_recv().unwrap(),
            Control::Steer("no newline at the end".into())
        );
    }
}
