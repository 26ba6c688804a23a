//! Explicit skills (the runner contract's context boundary): a `$name` or `/name` in a turn's
//! text (`graders::grade::runner_contract::skill_references`, the contract's reading) that
//! names a skill of the isolated Codex home becomes Codex's structured skill input,
//! `{type: "skill", name, path}` (`UserInput`, `SkillUserInput`), beside the text, on every turn
//! and steer that asks for it. The names and paths are the app-server's own (`skills/list`),
//! asked once per session; a listed skill outside the app-server's `CODEX_HOME` is not given.

use super::session::Session;
use super::{emit, transport_stop, DriverConfig, Stop};
use crate::event_log::EventLog;
use crate::launch::profiles::HostPaths;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// One skill the app-server lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListedSkill {
    pub(crate) name: String,
    pub(crate) path: String,
}

/// The enabled skills of a `skills/list` answer.
pub(crate) fn listed(result: &Value) -> Vec<ListedSkill> {
    result["data"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|entry| entry["skills"].as_array().into_iter().flatten())
        .filter(|s| s["enabled"].as_bool() != Some(false))
        .filter_map(|s| {
            Some(ListedSkill {
                name: s["name"].as_str()?.to_string(),
                path: s["path"].as_str()?.to_string(),
            })
        })
        .collect()
}

/// Whether `path` lies inside `home`, compared as written and, where both exist, resolved.
fn inside(path: &Path, home: &Path) -> bool {
    if path.starts_with(home) {
        return true;
    }
    match (path.canonicalize(), home.canonicalize()) {
        (Ok(p), Ok(h)) => p.starts_with(h),
        _ => false,
    }
}

/// The input items of a turn (or a steer) with `text`: the text, then one skill input per
/// skill it names that the app-server lists inside its `CODEX_HOME`.
pub(crate) async fn input_items(
    config: &DriverConfig,
    session: &mut Session,
    text: &str,
    log: &mut EventLog,
) -> Result<Value, Stop> {
    let mut items = vec![json!({"type": "text", "text": text})];
    let names = graders::grade::runner_contract::skill_references(text);
    if names.is_empty() {
        return Ok(Value::Array(items));
    }
    let catalogue = catalogue(config, session, log).await?;
    let codex_home: Option<PathBuf> =
        HostPaths::from_env_pairs(&config.run.app_server.env, None).codex_home;
    for name in names {
        let Some(skill) = catalogue.iter().find(|s| s.name == name) else {
            continue;
        };
        match &codex_home {
            Some(home) if inside(Path::new(&skill.path), home) => {
                items.push(json!({"type": "skill", "name": skill.name, "path": skill.path}));
            }
            _ => emit(
                log,
                super::warning(format!(
                    "the skill `{name}` the task names is listed at {}, outside the isolated Codex home: not given",
                    skill.path
                )),
            )?,
        }
    }
    Ok(Value::Array(items))
}

/// The session's skills, asked of its app-server once.
async fn catalogue(
    config: &DriverConfig,
    session: &mut Session,
    log: &mut EventLog,
) -> Result<Vec<ListedSkill>, Stop> {
    if let Some(known) = &session.skills {
        return Ok(known.clone());
    }
    let params = json!({"cwds": [config.run.launch.workspace]});
    let answer = session
        .client
        .request("skills/list", params, config.run.timeouts.request)
        .await
        .map_err(|e| transport_stop(&e))?;
    let skills = match answer {
        Ok(result) => listed(&result),
        Err(error) => {
            emit(
                log,
                super::warning(format!(
                    "skills/list was refused ({}): the task's skill references go as text only",
                    error.message
                )),
            )?;
            Vec::new()
        }
    };
    session.skills = Some(skills.clone());
    Ok(skills)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_skills_are_the_enabled_ones_with_a_name_and_a_path() {
        let result = json!({"data": [{"cwd": "/w", "errors": [], "skills": [
            {"name": "a", "path": "/h/.codex/skills/.system/a/SKILL.md", "enabled": true},
            {"name": "b", "path": "/h/.codex/skills/b/SKILL.md", "enabled": false},
            {"name": "c"},
        ]}]});
        assert_eq!(
            listed(&result),
            [ListedSkill {
                name: "a".into(),
                path: "/h/.codex/skills/.system/a/SKILL.md".into()
            }]
        );
        assert!(listed(&json!({})).is_empty());
    }

    #[test]
    fn a_skill_counts_only_inside_the_codex_home() {
        assert!(inside(
            Path::new("/h/.codex/skills/a/SKILL.md"),
            Path::new("/h/.codex")
        ));
        assert!(!inside(
            Path::new("/h/.codex-other/skills/a/SKILL.md"),
            Path::new("/h/.codex")
        ));
        assert!(!inside(
            Path::new("/w/.agents/skills/a/SKILL.md"),
            Path::new("/h/.codex")
        ));
    }
}
