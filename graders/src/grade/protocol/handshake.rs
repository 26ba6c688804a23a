//! `protocol-handshake/handshake` (obligation 8), for every launch the driver talked to:
//! - `initialize-first`: the driver's first message is the `initialize` request;
//! - `initialized-sent`: it sends the `initialized` notification;
//! - `initialized-before-requests`: no other request goes between `initialize` and
//!   `initialized` (ClientNotification.json: `initialized` tells the server the client is ready);
//! - then the session goes on.

use super::{incomplete, pass, Exchange, ProtocolCase};
use crate::grade::{fail, Terminal};
use crate::verdict::{EvidenceRef, Verdict};
use std::collections::BTreeSet;

const INITIALIZE: &str = "initialize";
const INITIALIZED: &str = "initialized";

pub(crate) struct Handshake {
    ex: Exchange,
}

impl Handshake {
    pub(crate) fn new() -> Self {
        Self {
            ex: Exchange::default(),
        }
    }

    /// The driver's messages on `launch` in wire order: (seq, method, is a request).
    fn messages(&self, launch: u64) -> Vec<(u64, &str, bool)> {
        let mut all: Vec<(u64, &str, bool)> = self
            .ex
            .client_requests
            .iter()
            .filter(|(_, r)| r.launch == launch)
            .map(|(seq, r)| (*seq, r.method.as_str(), true))
            .chain(
                self.ex
                    .client_notifications
                    .iter()
                    .filter(|(_, n)| n.launch == launch)
                    .map(|(seq, n)| (*seq, n.method.as_str(), false)),
            )
            .collect();
        all.sort_by_key(|(seq, _, _)| *seq);
        all
    }

    fn check_launch(&self, launch: u64) -> Option<Verdict> {
        let messages = self.messages(launch);
        let (first_seq, first, first_is_request) = *messages.first()?;
        if first != INITIALIZE || !first_is_request {
            return Some(fail(
                "initialize-first",
                format!(
                    "the driver's first message to the app-server (launch {launch}) was the {} `{first}`; the protocol's first message is the `initialize` request, before anything else",
                    if first_is_request { "request" } else { "notification" }
                ),
                vec![EvidenceRef::at(first_seq, first)],
            ));
        }
        let initialized = messages
            .iter()
            .find(|(_, method, request)| *method == INITIALIZED && !request);
        let Some((initialized_seq, _, _)) = initialized else {
            return Some(fail(
                "initialized-sent",
                format!("the driver never sent the `initialized` notification on launch {launch} after its `initialize`; the protocol's handshake is `initialize`, its answer, then `initialized` (ClientNotification.json#initialized) before any other request"),
                vec![EvidenceRef::at(first_seq, INITIALIZE)],
            ));
        };
        let early = messages
            .iter()
            .skip(1)
            .find(|(seq, _, request)| *request && seq < initialized_seq);
        if let Some((seq, method, _)) = early {
            return Some(fail(
                "initialized-before-requests",
                format!("the driver sent the request `{method}` on launch {launch} before its `initialized` notification; the handshake ends with `initialized` before any other request"),
                vec![EvidenceRef::at(*seq, method), EvidenceRef::at(*initialized_seq, INITIALIZED)],
            ));
        }
        None
    }
}

impl ProtocolCase for Handshake {
    /// The handshake comes before any session: it is judged first, the session after.
    fn needs_session(&self) -> bool {
        false
    }

    exchange_in_field_ex!();

    fn decide(&self, terminal: &Terminal) -> Verdict {
        let launches: BTreeSet<u64> = self
            .ex
            .client_requests
            .iter()
            .map(|(_, r)| r.launch)
            .chain(self.ex.client_notifications.iter().map(|(_, n)| n.launch))
            .collect();
        if launches.is_empty() {
            return incomplete(
                "the driver sent the app-server nothing, so the case shows nothing about its handshake".into(),
                vec![terminal.evidence()],
            );
        }
        if let Some(v) = launches.iter().find_map(|l| self.check_launch(*l)) {
            return v;
        }
        if let Some(v) = self.ex.session.never_opened(terminal) {
            return v;
        }
        match self.ex.session_went_on() {
            Ok(went_on) => pass(
                format!(
                    "on each of {} launch(es) the driver sent `initialize` first and `initialized` before any other request, and the session went on: {}",
                    launches.len(),
                    went_on.describe()
                ),
                went_on.evidence(),
            ),
            Err(fault) => fault.verdict("the driver's handshake was right", terminal),
        }
    }
}
