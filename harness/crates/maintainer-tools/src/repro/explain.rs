//! Why each environment's failure happens, for `harness repro ENV`: the cause in a few
//! sentences (the spec's own, `EnvSpec::cause`), then what the spec says (platform, mechanism,
//! message, when it fails Codex).

use sandbox::spec::EnvSpec;

pub(crate) fn explanation(spec: &EnvSpec) -> String {
    let mut text = spec.cause.to_string();
    if !text.is_empty() {
        text.push(' ');
    }
    text.push_str(&format!(
        "Stands for: {}. Mechanism here: {}. Codex's users see: {}. It fails Codex {}.",
        spec.stands_for,
        spec.restricts,
        spec.message.unwrap_or("nothing (Codex works)"),
        spec.fails_at.describe()
    ));
    text
}
