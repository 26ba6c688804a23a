//! The app-server's environment, as the runner contract allows it: a short allowlist of
//! names — where to find programs, the home folders Codex needs to authenticate and keep its
//! state, temporary files, locale and terminal — and nothing inherited besides. A driver that
//! hands the app-server its own environment passes along its credentials, tokens and harness
//! settings, which Codex then hands to the model's commands.

/// Names the app-server's environment may carry. `PWD` is set by the shell that starts it.
pub const APP_SERVER_ENV_ALLOWLIST: &[&str] = &[
    "PATH",
    "HOME",
    "CODEX_HOME",
    "TMPDIR",
    "LANG",
    "LANGUAGE",
    "TZ",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "PWD",
];

/// Whether `name` may be in the app-server's environment: an allowlisted name, or a locale
/// category (`LC_*`).
pub fn app_server_env_allowed(name: &str) -> bool {
    APP_SERVER_ENV_ALLOWLIST.contains(&name)
        || name
            .strip_prefix("LC_")
            .is_some_and(|rest| !rest.is_empty() && rest.chars().all(|c| c.is_ascii_uppercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowlist_and_locale_categories_only() {
        for name in ["PATH", "HOME", "CODEX_HOME", "TMPDIR", "LC_ALL", "LC_CTYPE"] {
            assert!(app_server_env_allowed(name), "{name}");
        }
        for name in [
            "OPENAI_API_KEY",
            "HARNESS_TASK",
            "AWS_SECRET_ACCESS_KEY",
            "LC_",
            "LC_x",
            "path",
        ] {
            assert!(!app_server_env_allowed(name), "{name}");
        }
    }
}
