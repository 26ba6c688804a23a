//! The first field where two JSON values differ: its path (`result.thread.turns[0].status`)
//! and both values, a field one side lacks shown as `absent` (not as `null`, which a side may
//! well send: the difference between the two is what a driver's models trip on).

use serde_json::Value;

/// Where two values first differ, keys in sorted order, array elements in order.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldDifference {
    /// `a.b[2].c`; empty for the values themselves.
    pub path: String,
    pub(crate) left: Option<Value>,
    pub(crate) right: Option<Value>,
}

/// The longest value shown in a description.
const SHOWN_CHARS: usize = 240;

fn show(value: Option<&Value>) -> String {
    match value {
        Some(value) => driver::rpc::excerpt(&value.to_string(), SHOWN_CHARS),
        None => "absent".to_string(),
    }
}

impl FieldDifference {
    pub fn show_left(&self) -> String {
        show(self.left.as_ref())
    }

    pub fn show_right(&self) -> String {
        show(self.right.as_ref())
    }
}

/// The first difference between `left` and `right`, or `None` when they are equal.
pub fn first(left: &Value, right: &Value) -> Option<FieldDifference> {
    walk(Some(left), Some(right), String::new())
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn walk(left: Option<&Value>, right: Option<&Value>, path: String) -> Option<FieldDifference> {
    if left == right {
        return None;
    }
    match (left, right) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter()
                .find_map(|k| walk(x.get(k), y.get(k), join(&path, k)))
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            (0..x.len().max(y.len())).find_map(|i| walk(x.get(i), y.get(i), format!("{path}[{i}]")))
        }
        _ => Some(FieldDifference {
            path,
            left: left.cloned(),
            right: right.cloned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_first_differing_field_is_named_by_its_path_with_both_values() {
        let real = json!({"result": {"thread": {"id": "t"}, "serviceTier": "default"}});
        let fake = json!({"result": {"thread": {"id": "t"}, "serviceTier": null}});
        let found = first(&real, &fake).expect("a difference");
        assert_eq!(found.path, "result.serviceTier");
        assert_eq!(
            (found.show_left(), found.show_right()),
            (r#""default""#.to_string(), "null".to_string())
        );
        assert_eq!(first(&real, &real), None);
    }

    #[test]
    fn a_missing_field_is_absent_not_null_and_arrays_compare_by_element() {
        let found = first(&json!({"a": null}), &json!({})).expect("a difference");
        assert_eq!(
            (
                found.path.as_str(),
                found.show_left().as_str(),
                found.show_right().as_str()
            ),
            ("a", "null", "absent")
        );
        let found = first(
            &json!({"turns": [{"status": "completed"}, {"status": "failed"}]}),
            &json!({"turns": [{"status": "completed"}]}),
        )
        .expect("a difference");
        assert_eq!(found.path, "turns[1]");
        assert_eq!(found.show_right(), "absent");
        let found = first(&json!([1, {"x": [true]}]), &json!([1, {"x": [false]}])).unwrap();
        assert_eq!(found.path, "[1].x[0]");
        let found = first(&json!(1), &json!("1")).unwrap();
        assert_eq!(found.path, "");
    }
}
