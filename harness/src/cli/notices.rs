//! Where library code's notices reach the user. Library crates print nothing: what a caller
//! cannot be handed (a cleanup in `Drop`, an `atexit` hook, a hidden subcommand's failure, a
//! tool's progress) they emit as a `tracing` event with the target [`NOTICE_TARGET`]; this
//! subscriber writes each one to stderr as its bare message, one line, as the `eprintln!` it
//! replaced did. Every other `tracing` event stays off, as it was before there was a subscriber.

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

/// The `tracing` target of a message meant for the person running the harness.
pub const NOTICE_TARGET: &str = "notice";

/// Install the process's subscriber (once, first thing in `main`: the hidden subcommands and
/// the `atexit` teardown speak through it too).
pub fn show_on_stderr() {
    // A second subscriber (a test that installed its own) keeps the first: nothing to report.
    let _ = tracing_subscriber::registry()
        .with(bare_lines(std::io::stderr))
        .try_init();
}

/// Each notice as its message and a newline: no time, level, target or colour.
fn bare_lines<W>(writer: W) -> impl Layer<Registry>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(false)
        .without_time()
        .with_level(false)
        .with_target(false)
        .with_filter(Targets::new().with_target(NOTICE_TARGET, LevelFilter::TRACE))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_notice_is_its_bare_line_and_other_events_stay_off() {
        let captured = Captured::default();
        let sink = captured.clone();
        let subscriber = tracing_subscriber::registry().with(bare_lines(move || sink.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let killed = 2;
            tracing::warn!(target: "notice", "harness: killed {killed} process(es) of /x: sh");
            tracing::info!(target: "notice", "running a pair");
            tracing::warn!(target: "sandbox::reap", "left alone: a debug event");
            tracing::error!("an event of the module's own target");
        });
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text,
            "harness: killed 2 process(es) of /x: sh\nrunning a pair\n"
        );
    }
}
