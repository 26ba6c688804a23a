//! Codex's `-c key=value` overrides, read the way Codex reads them: the key is split on `.`
//! (quotes stay part of a key part), the value is a TOML value, or a bare string when it does not
//! parse as one; later overrides replace earlier ones at the same key. The launch argv recorded in
//! `run.started` is made of these, so the graders read it with this module, and the fake
//! app-server parses its own command line with it.

/// Why an override could not be split into a key and a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OverrideError {
    /// No `=` in the override.
    MissingEquals,
    /// Nothing before the `=`.
    EmptyKey,
}

/// `key=value` → (key parts, value).
pub fn parse_override(raw: &str) -> Result<(Vec<String>, toml::Value), OverrideError> {
    let (key, value) = raw.split_once('=').ok_or(OverrideError::MissingEquals)?;
    let key = key.trim();
    if key.is_empty() {
        return Err(OverrideError::EmptyKey);
    }
    let value = value.trim();
    let parsed = parse_toml_value(value).unwrap_or_else(|| {
        toml::Value::String(value.trim_matches(|c| c == '"' || c == '\'').to_string())
    });
    Ok((key.split('.').map(str::to_string).collect(), parsed))
}

fn parse_toml_value(text: &str) -> Option<toml::Value> {
    let mut table: toml::Table = toml::from_str(&format!("v = {text}")).ok()?;
    table.remove("v")
}

/// Set `key` (its parts) to `value` in `root`, making (or replacing by) tables on the way.
pub fn insert_dotted(root: &mut toml::Table, key: &[String], value: toml::Value) {
    let Some((last, parents)) = key.split_last() else {
        return;
    };
    let mut table = root;
    for part in parents {
        let entry = table
            .entry(part.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !entry.is_table() {
            *entry = toml::Value::Table(toml::Table::new());
        }
        let toml::Value::Table(inner) = entry else {
            unreachable!("just made a table")
        };
        table = inner;
    }
    table.insert(last.clone(), value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_keys_keeps_quotes_and_falls_back_to_strings() {
        let (key, value) = parse_override(r#"permissions.p.filesystem.":root"=read"#).unwrap();
        assert_eq!(key, ["permissions", "p", "filesystem", "\":root\""]);
        assert_eq!(value, toml::Value::String("read".into()));
        let (_, value) = parse_override("p={network={enabled=true}}").unwrap();
        assert_eq!(value["network"]["enabled"], toml::Value::Boolean(true));
        assert_eq!(parse_override("novalue"), Err(OverrideError::MissingEquals));
        assert_eq!(parse_override(" =x"), Err(OverrideError::EmptyKey));
    }

    #[test]
    fn later_overrides_replace_earlier_ones() {
        let mut root = toml::Table::new();
        for raw in ["a.b=1", "a=2", "a.c=3"] {
            let (key, value) = parse_override(raw).unwrap();
            insert_dotted(&mut root, &key, value);
        }
        assert_eq!(root["a"]["c"], toml::Value::Integer(3));
        assert!(root["a"].get("b").is_none());
    }
}
