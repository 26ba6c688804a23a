//! The items a turn streams to the client: the user's input, agent messages and plan items as
//! Codex streams them, each announced with `item/completed` once whole.

use super::TurnRun;
use crate::ids;
use crate::protocol::shapes;
use crate::scenario::model::{plan_item_text, stream_chunks};
use serde_json::{json, Value};

impl TurnRun {
    /// The user's input as a `userMessage` item of the turn (`item/started` + `item/completed`).
    pub(super) fn user_message(&mut self, input: &Value) {
        let (thread_id, turn_id) = (self.plan.thread_id.clone(), self.plan.turn_id.clone());
        let now = shapes::now_ms();
        let user_id = ids::uuid_v7();
        let user_item = shapes::user_message_item(&user_id, input, now, None);
        self.send(shapes::item_started(user_item, &thread_id, &turn_id, now));
        let user_done = shapes::user_message_item(&user_id, input, now, Some(now));
        self.complete_item(user_done, now);
    }

    /// An agent message as Codex plays a streamed one: `item/started` with an empty text, one
    /// `item/agentMessage/delta` per chunk the model streamed, then `item/completed` with the
    /// whole text.
    pub(super) fn message(&mut self, text: &str) {
        let id = ids::message_id();
        self.streamed_item(
            &id,
            text,
            shapes::agent_message_item,
            "item/agentMessage/delta",
        );
        self.raw_message(&id, text);
    }

    /// A `<proposed_plan>` block: Codex streams the block's body as `item/plan/delta`s (one per
    /// chunk) into a `plan` item, and a message holding nothing but the block yields no
    /// agentMessage item.
    pub(super) fn plan_item(&mut self, plan: &str) {
        let id = match crate::persona::current().plan_item_ids {
            crate::persona::PlanItemIds::TurnSuffix => format!("{}-plan", self.plan.turn_id),
            crate::persona::PlanItemIds::Uuid => ids::uuid_v7(),
        };
        let text = plan_item_text(plan);
        self.streamed_item(&id, &text, shapes::plan_item, "item/plan/delta");
    }

    /// A streamed text item: `item/started` with an empty text, one `delta_method`
    /// notification per chunk the model streamed, then `item/completed` with the whole text.
    pub(super) fn streamed_item(
        &mut self,
        id: &str,
        text: &str,
        item: fn(&str, &str, u64, Option<u64>) -> Value,
        delta_method: &str,
    ) {
        let (thread_id, turn_id) = (self.plan.thread_id.clone(), self.plan.turn_id.clone());
        let now = shapes::now_ms();
        self.send(shapes::item_started(
            item(id, "", now, None),
            &thread_id,
            &turn_id,
            now,
        ));
        for chunk in stream_chunks(text) {
            self.send(shapes::notification(
                delta_method,
                json!({"threadId": thread_id, "turnId": turn_id, "itemId": id, "delta": chunk}),
            ));
        }
        let completed = shapes::now_ms();
        self.complete_item(item(id, text, now, Some(completed)), completed);
    }

    /// Record a finished item in the turn and announce it with `item/completed`.
    pub(super) fn complete_item(&mut self, done: Value, completed: u64) {
        let (thread_id, turn_id) = self.ids();
        let message = shapes::item_completed(done.clone(), thread_id, turn_id, completed);
        self.items.push(done);
        self.send(message);
    }
}
