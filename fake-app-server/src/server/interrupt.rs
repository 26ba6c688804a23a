//! Where `turn/interrupt` is answered. Codex 0.169 answers it when the turn aborts, after what
//! the interrupt ended and right before the turn's `thread/status/changed` and `turn/completed`
//! (measured with `harness explore`: a dynamic tool call pending when the interrupt came ends
//! `failed` before the answer). The handler hands the turn an [`InterruptAnswer`] with the
//! signal and waits, bounded, until the turn is ready for the answer; the turn waits, bounded,
//! until the answer is written, then ends. Either bound passing answers as before: at once.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Duration;

/// The longest the handler holds the answer for the turn to get ready (a turn busy in a step
/// that does not read its signals, such as a running command).
const HANDLER_BOUND: Duration = Duration::from_secs(2);
/// The longest the turn waits for the answer to be written.
const TURN_BOUND: Duration = Duration::from_secs(2);

/// The turn's side: given with the interrupt signal.
#[derive(Debug)]
pub(crate) struct InterruptAnswer {
    ready: Sender<Sender<()>>,
}

/// The handler's side.
pub(crate) struct PendingInterruptAnswer {
    ready: Receiver<Sender<()>>,
}

impl InterruptAnswer {
    pub(crate) fn new() -> (Self, PendingInterruptAnswer) {
        let (ready, waiting) = channel();
        (Self { ready }, PendingInterruptAnswer { ready: waiting })
    }

    /// Have the interrupt answered now, and wait until it has been written.
    pub(crate) fn answer_now(self) {
        let (written, wait) = channel();
        if self.ready.send(written).is_ok() && wait.recv_timeout(TURN_BOUND).is_err() {
            eprintln!("fake-app-server: the turn/interrupt answer was not written within {TURN_BOUND:?}; the turn ends");
        }
    }
}

impl PendingInterruptAnswer {
    /// Wait until the turn is ready for the answer (or has ended without reading the signal);
    /// what to run once the answer is written.
    pub(crate) fn wait(self) -> Option<Box<dyn FnOnce() + Send>> {
        match self.ready.recv_timeout(HANDLER_BOUND) {
            Ok(written) => Some(Box::new(move || {
                let _ = written.send(());
            })),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                eprintln!("fake-app-server: the interrupted turn did not get ready within {HANDLER_BOUND:?}; answering turn/interrupt now");
                None
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_turn_ends_only_after_the_answer_is_written() {
        let (answer, pending) = InterruptAnswer::new();
        let (order_tx, order_rx) = channel();
        let turn_order = order_tx.clone();
        let turn = std::thread::spawn(move || {
            turn_order.send("item completed").unwrap();
            answer.answer_now();
            turn_order.send("turn completed").unwrap();
        });
        let after = pending.wait().expect("the turn got ready");
        order_tx.send("answer").unwrap();
        after();
        turn.join().unwrap();
        let order: Vec<&str> = order_rx.try_iter().collect();
        assert_eq!(order, ["item completed", "answer", "turn completed"]);
    }

    #[test]
    fn a_turn_that_never_reads_the_signal_does_not_hold_the_answer() {
        let (answer, pending) = InterruptAnswer::new();
        drop(answer);
        assert!(pending.wait().is_none());
    }
}
