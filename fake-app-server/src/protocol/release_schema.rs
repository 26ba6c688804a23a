//! The protocol of the release the fake plays, as its binary generates it: the
//! `ServerNotification.json` and `ServerRequest.json` committed in
//! `graders/protocol/<VERSION>/` (recorded from the real binary by `harness drift`, held against
//! it by a test). The fake reads them to know which server requests a release has and to
//! generate an instance of every notification ([`super::instances`]).

use serde_json::Value;
use std::sync::OnceLock;

/// One release's server-side protocol.
pub struct ReleaseSchema {
    pub version: &'static str,
    notifications: Value,
    requests: Value,
}

macro_rules! release {
    ($version:literal) => {
        (
            $version,
            include_str!(concat!(
                "../../../graders/protocol/",
                $version,
                "/ServerNotification.json"
            )),
            include_str!(concat!(
                "../../../graders/protocol/",
                $version,
                "/ServerRequest.json"
            )),
        )
    };
}

/// Every release with a persona (see `crate::persona`): a persona without a committed schema
/// fails the unit test below.
const RELEASES: [(&str, &str, &str); 2] = [release!("0.169.0"), release!("0.171.0")];

static PARSED: OnceLock<Vec<ReleaseSchema>> = OnceLock::new();

fn parsed() -> &'static [ReleaseSchema] {
    PARSED.get_or_init(|| {
        RELEASES
            .iter()
            .map(|(version, notifications, requests)| {
                let parse = |text: &str, what: &str| -> Value {
                    serde_json::from_str(text).unwrap_or_else(|e| {
                        panic!("graders/protocol/{version}/{what} is not JSON: {e}")
                    })
                };
                ReleaseSchema {
                    version,
                    notifications: parse(notifications, "ServerNotification.json"),
                    requests: parse(requests, "ServerRequest.json"),
                }
            })
            .collect()
    })
}

/// The schema of Codex `version`, if the fake carries it.
pub fn for_version(version: &str) -> Option<&'static ReleaseSchema> {
    parsed().iter().find(|r| r.version == version)
}

/// The schema of the release this process plays.
pub fn current() -> Result<&'static ReleaseSchema, String> {
    let version = crate::persona::current().version;
    for_version(version).ok_or_else(|| {
        format!("fake-app-server carries no protocol schema of Codex {version} (graders/protocol/{version}/)")
    })
}

/// Every release the fake carries a schema of.
pub fn all() -> &'static [ReleaseSchema] {
    parsed()
}

/// The `method` of each branch of a union keyed by method (`ServerNotification.json`,
/// `ServerRequest.json`), with the branch.
fn branches(union: &Value) -> impl Iterator<Item = (&str, &Value)> {
    union["oneOf"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|branch| {
            let method = branch["properties"]["method"]["enum"][0].as_str()?;
            Some((method, branch))
        })
}

impl ReleaseSchema {
    /// Every notification the release can send, in the schema's order.
    pub fn notification_methods(&self) -> Vec<&str> {
        branches(&self.notifications).map(|(m, _)| m).collect()
    }

    /// Every request the release can send a client, in the schema's order.
    pub fn request_methods(&self) -> Vec<&str> {
        branches(&self.requests).map(|(m, _)| m).collect()
    }

    pub fn has_request(&self, method: &str) -> bool {
        branches(&self.requests).any(|(m, _)| m == method)
    }

    /// The whole `ServerNotification.json` document.
    pub fn notifications_document(&self) -> &Value {
        &self.notifications
    }

    /// The whole `ServerRequest.json` document.
    pub fn requests_document(&self) -> &Value {
        &self.requests
    }

    /// The `params` schema of notification `method`.
    pub fn notification_params(&self, method: &str) -> Option<&Value> {
        branches(&self.notifications)
            .find(|(m, _)| *m == method)
            .map(|(_, branch)| &branch["properties"]["params"])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_persona_has_its_release_schema() {
        for persona in crate::persona::all() {
            let schema = for_version(persona.version)
                .unwrap_or_else(|| panic!("no schema for persona {}", persona.version));
            let methods = schema.notification_methods();
            let listed: Vec<&str> = persona.server_notifications().collect();
            let mut sorted = methods.clone();
            sorted.sort_unstable();
            let mut listed_sorted = listed.clone();
            listed_sorted.sort_unstable();
            assert_eq!(
                sorted, listed_sorted,
                "the persona's notifications of {} differ from its schema",
                persona.version
            );
            assert!(schema.has_request("item/commandExecution/requestApproval"));
        }
        assert!(for_version("0.169.0")
            .unwrap()
            .has_request("currentTime/read"));
        assert!(!for_version("0.171.0")
            .unwrap()
            .has_request("currentTime/read"));
    }
}
