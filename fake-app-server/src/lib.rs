//! A scriptable fake of `codex app-server`.
