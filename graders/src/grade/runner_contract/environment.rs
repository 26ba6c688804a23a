//! `app-server-environment`: the app-server is started with an allowlisted environment (the
//! runner contract: it keeps `HOME` and `CODEX_HOME` only to authenticate; bearer values, API
//! keys and other inherited variables are not passed). The tap records the names of the
//! environment the driver passed on every launch; every name must be on
//! [`super::APP_SERVER_ENV_ALLOWLIST`] (or a locale category) — `environment-allowlisted` names
//! the others — and the session goes on. A driver that hands the app-server its whole
//! environment passes the harness's own variables (`HARNESS_TASK`, …) and fails.

use super::super::protocol::{incomplete, pass, Exchange, ProtocolCase};
use super::app_server_env_allowed;
use crate::events::{AppServerLaunched, Body, Kind, Source};
use crate::grade::{documented, fail, Terminal};
use crate::verdict::{EvidenceRef, Verdict};

/// Most names a reason lists.
const NAMES_SHOWN: usize = 12;

pub(crate) struct AllowlistedEnvironment {
    ex: Exchange,
    launches: Vec<(u64, AppServerLaunched)>,
}

impl AllowlistedEnvironment {
    pub(crate) fn new() -> Self {
        Self {
            ex: Exchange::default(),
            launches: Vec::new(),
        }
    }
}

impl ProtocolCase for AllowlistedEnvironment {
    fn exchange(&self) -> &Exchange {
        &self.ex
    }

    fn exchange_mut(&mut self) -> &mut Exchange {
        &mut self.ex
    }

    fn wants_more(&self, kind: Kind) -> bool {
        kind == Kind::AppServerLaunched
    }

    fn observe_more(&mut self, seq: u64, source: Source, body: &Body) {
        if let Body::AppServerLaunched(l) = body {
            if documented(source, body) {
                self.launches.push((seq, l.clone()));
            }
        }
    }

    fn decide(&self, terminal: &Terminal) -> Verdict {
        if self.launches.is_empty() {
            return incomplete(
                "the stream records no launch of the app-server, so the environment it was given is not known".into(),
                vec![terminal.evidence()],
            );
        }
        for (seq, launch) in &self.launches {
            let extra: Vec<&str> = launch
                .env_names
                .iter()
                .map(String::as_str)
                .filter(|n| !app_server_env_allowed(n))
                .collect();
            if !extra.is_empty() || launch.env_names_left_out > 0 {
                let shown = extra
                    .iter()
                    .take(NAMES_SHOWN)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ");
                let more =
                    extra.len().saturating_sub(NAMES_SHOWN) as u64 + launch.env_names_left_out;
                return fail(
                    "environment-allowlisted",
                    format!(
                        "the driver started the app-server (launch {}) with {shown}{} in its environment: the runner contract gives the app-server an allowlisted environment (PATH, HOME and CODEX_HOME to authenticate, TMPDIR, locale, time zone, user, shell, terminal) and passes no inherited variable — whatever reaches the app-server reaches the model's commands",
                        launch.launch,
                        if more > 0 { format!(" and {more} more") } else { String::new() }
                    ),
                    vec![EvidenceRef::at(*seq, &format!("protocol.app-server-launched {}", launch.launch))],
                );
            }
        }
        let what = format!(
            "every one of the {} launches of the app-server had only allowlisted names in its environment",
            self.launches.len()
        );
        match self.ex.session_went_on() {
            Ok(went_on) => {
                let mut evidence: Vec<EvidenceRef> = self
                    .launches
                    .iter()
                    .map(|(seq, l)| EvidenceRef::at(*seq, &l.env_names.join(" ")))
                    .collect();
                evidence.extend(went_on.evidence());
                pass(format!("{what}; {}", went_on.describe()), evidence)
            }
            Err(fault) => fault.verdict(&what, terminal),
        }
    }
}
