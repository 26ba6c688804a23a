//! What the driver-event comparison cannot see: ids. The fidelity normaliser maps every id to
//! `<id-N>`, so a change in how an id is made (Codex 0.171 gives a plan item its own UUID where
//! 0.169 used `<turnId>-plan`) is invisible there. This reads a cell's transcript and names the
//! shape of every item id, by item type.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// How an item id is made, relative to its turn.
pub(crate) fn id_shape(id: &str, turn_id: &str) -> String {
    if !turn_id.is_empty() && id.starts_with(turn_id) && id != turn_id {
        return format!("<turnId>{}", &id[turn_id.len()..]);
    }
    if id == turn_id {
        return "<turnId>".into();
    }
    if uuid::Uuid::parse_str(id).is_ok() {
        return "<uuid>".into();
    }
    // A prefix such as `call_` or `msg_` is the shape; the rest is the id proper.
    match id.find('_') {
        Some(index) => format!("{}_…", &id[..index]),
        None => "<other>".into(),
    }
}

/// Item type → the id shapes seen.
pub(crate) type IdShapes = BTreeMap<String, BTreeSet<String>>;

/// The shape of every id the model API made (`call_…` tool calls, `msg_…`/`item_…` output
/// items): the mock model API and the fake's scripted model make them, not the app-server.
pub(crate) const MODEL_MADE: &str = "<model-made>";

/// [`item_id_shapes`] with the ids the model made as one shape ([`MODEL_MADE`]): what the
/// fidelity comparison holds an app-server to. The items of `left_out` (by id) do not count:
/// those the driver-visible comparison leaves out as racing (a sandbox denial Codex may or may
/// not report as an item), which the fake mirrors with the same race, so one run has such an
/// item and the next none on either side.
pub(crate) fn app_server_id_shapes(transcript: &Path, left_out: &[String]) -> IdShapes {
    item_id_shapes(transcript, left_out)
        .into_iter()
        .map(|(kind, shapes)| {
            let shapes = shapes
                .into_iter()
                .map(|s| {
                    if s.ends_with("_…") {
                        MODEL_MADE.to_string()
                    } else {
                        s
                    }
                })
                .collect();
            (kind, shapes)
        })
        .collect()
}

/// Item type → the id shapes seen in `item/completed` notifications of a transcript, but for
/// the items of `left_out` (by id).
pub(crate) fn item_id_shapes(transcript: &Path, left_out: &[String]) -> IdShapes {
    let mut shapes: IdShapes = BTreeMap::new();
    let Ok(Some(bytes)) =
        graders::evidence_file::read(transcript, graders::evidence_file::MAX_STREAMED_BYTES)
    else {
        return shapes;
    };
    let text = String::from_utf8_lossy(&bytes);
    for line in text.lines() {
        let Ok(record) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let message = &record["message"];
        if message["method"] != "item/completed" {
            continue;
        }
        let params = &message["params"];
        let (Some(kind), Some(id)) = (
            params["item"]["type"].as_str(),
            params["item"]["id"].as_str(),
        ) else {
            continue;
        };
        if left_out.iter().any(|l| l == id) {
            continue;
        }
        let turn = params["turnId"].as_str().unwrap_or_default();
        shapes
            .entry(kind.to_string())
            .or_default()
            .insert(id_shape(id, turn));
    }
    shapes
}

/// Each item type whose id shapes differ: `type: pin {…} → new {…}`.
pub(crate) fn id_shape_changes(
    pin: &BTreeMap<String, BTreeSet<String>>,
    new: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let kinds: BTreeSet<&String> = pin.keys().chain(new.keys()).collect();
    let empty = BTreeSet::new();
    kinds
        .into_iter()
        .filter_map(|kind| {
            let before = pin.get(kind).unwrap_or(&empty);
            let after = new.get(kind).unwrap_or(&empty);
            (before != after).then(|| format!("{kind} item ids: {before:?} → {after:?}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_name_how_an_id_is_made() {
        let turn = "01a2310e-f7aa-71a2-b7e9-e659bfd286b5";
        assert_eq!(id_shape(&format!("{turn}-plan"), turn), "<turnId>-plan");
        assert_eq!(
            id_shape("01a2310e-fcb4-7c82-99a4-22e0807f6661", turn),
            "<uuid>"
        );
        assert_eq!(id_shape("call_7b96857e_0_0_0", turn), "call_…");
        let pin = [("plan".to_string(), ["<turnId>-plan".to_string()].into())].into();
        let new = [("plan".to_string(), ["<uuid>".to_string()].into())].into();
        assert_eq!(
            id_shape_changes(&pin, &new),
            ["plan item ids: {\"<turnId>-plan\"} → {\"<uuid>\"}"]
        );
    }

    /// Gate 19: a racing sandbox denial reported as an item on one side only (the fake's
    /// command outlived its start-up window under load) made the pair fail on id shapes while
    /// the sequences, which leave such items out, agreed.
    #[test]
    fn racing_items_left_out_of_the_shapes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("transcript.jsonl");
        let completed = |kind: &str, id: &str| {
            serde_json::json!({"message": {"method": "item/completed", "params": {
                "turnId": "t", "item": {"type": kind, "id": id}}}})
            .to_string()
        };
        std::fs::write(
            &path,
            format!(
                "{}\n{}\n",
                completed("commandExecution", "call_7b96857e_0_0_0"),
                completed("agentMessage", "msg_1")
            ),
        )
        .unwrap();
        let all = app_server_id_shapes(&path, &[]);
        assert!(all.contains_key("commandExecution"), "{all:?}");
        let without = app_server_id_shapes(&path, &["call_7b96857e_0_0_0".to_string()]);
        assert!(!without.contains_key("commandExecution"), "{without:?}");
        assert_eq!(without["agentMessage"], [MODEL_MADE.to_string()].into());
    }
}
