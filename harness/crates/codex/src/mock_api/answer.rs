//! The mock's answer to a model request (`POST /v1/responses`): the scripted response of the
//! request's position in its thread, streamed; a review request's scripted review.

use super::{error_response, probe_id_for, sse, thread_id, tools, RecordedRequest, Shared};
use super::{position, FailureKind, MAX_REQUESTS};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use fake_app_server::model_log::ModelLogEntry;
use fake_app_server::scenario::model::{
    find_marker, write_outcome_told, ModelStep, Review, TemplateContext,
};
use fake_app_server::scenario::TurnOrigin;
use position::Position;
use serde_json::Value;

/// The answer to `record`'s request, its kind written into `record.answer`: over the request
/// limit a 500; a review request its review; else the script's response at the request's
/// position (or the scripted failure there).
pub(super) fn answer(
    shared: &Shared,
    headers: &HeaderMap,
    record: &mut RecordedRequest,
) -> Response {
    if shared.records.lock().expect("records lock").len() >= MAX_REQUESTS {
        record.answer = "http-500".into();
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("mock model API: request limit {MAX_REQUESTS} reached"),
        );
    }
    if is_review_request(&record.body) {
        return answer_review(shared, record);
    }
    let Some(input) = record.body.get("input").and_then(Value::as_array) else {
        record.answer = "http-400".into();
        return error_response(StatusCode::BAD_REQUEST, "request has no `input` array");
    };
    let position = position::position(input);
    let turn = position::turn_context(input);
    record.position = Some(position);
    let thread = thread_id(headers, &record.body);
    let probe_id = probe_id_for(&thread);
    log_received(shared, &thread, input);
    let attempt = count_attempt(shared, &thread, position);
    let failure = shared
        .script
        .failure_at(position.turn, position.response, attempt);
    if let Some(FailureKind::HttpStatus { status }) = failure {
        record.answer = format!("http-{status}");
        let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return error_response(status, "mock model API: scripted failure");
    }
    let origin = TurnOrigin {
        start_index: start_index(shared, &thread),
        ephemeral: None,
        // A turn/start `outputSchema` reaches the model as this JSON-schema `text.format`.
        output_schema: record.body["text"]["format"]["name"] == OUTPUT_SCHEMA_NAME,
    };
    let steps = shared
        .script
        .response_steps_for(Some(origin), position.turn, position.response);
    let ids = sse::ResponseIds {
        stem: format!("{probe_id}_{}_{}", position.turn, position.response),
    };
    let template = TemplateContext {
        probe_id,
        write_outcome: turn
            .last_exec
            .map(|told| write_outcome_told(&told).to_string()),
        user_marker: find_marker(&turn.user_text),
    };
    queue_reviews(shared, steps);
    let offered = tools::Offered::from_request(&record.body);
    let rendered = sse::render(steps, &template, &offered, &ids, failure);
    {
        let mut log = shared.model_log.lock().expect("model log lock");
        for call in &rendered.calls {
            log.write(&ModelLogEntry::ToolCall {
                call_id: call.call_id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
        }
    }
    record.answer = match failure {
        Some(FailureKind::ResponseFailed { .. }) => "failed".into(),
        Some(FailureKind::StreamClosedEarly) => "closed-early".into(),
        Some(FailureKind::StreamDropped) => "dropped".into(),
        _ => "stream".into(),
    };
    event_stream(rendered.body)
}

/// What the model received in `input` that the model log does not hold yet: the user's
/// messages (per thread) and the tools' outputs.
fn log_received(shared: &Shared, thread: &str, input: &[Value]) {
    let mut log = shared.model_log.lock().expect("model log lock");
    for seen in position::received(input) {
        match seen {
            position::Received::Input(message) => {
                if log.logged.insert(format!("input {thread} {}", message.key)) {
                    log.write(&ModelLogEntry::UserInput { text: message.text });
                }
            }
            position::Received::Output(output) => {
                if log.logged.insert(format!("output {}", output.call_id)) {
                    log.write(&ModelLogEntry::ToolOutput {
                        call_id: output.call_id,
                        output: output.output,
                    });
                }
            }
        }
    }
}

/// This request's attempt at its (thread, turn, response), counting from 1.
fn count_attempt(shared: &Shared, thread: &str, position: Position) -> usize {
    let mut attempts = shared.attempts.lock().expect("attempts lock");
    let count = attempts
        .entry((thread.to_string(), position.turn, position.response))
        .or_default();
    *count += 1;
    *count
}

/// Where `thread` stands in the order of the threads' first requests.
fn start_index(shared: &Shared, thread: &str) -> usize {
    let mut order = shared.thread_order.lock().expect("thread order lock");
    match order.iter().position(|t| *t == thread) {
        Some(index) => index,
        None => {
            order.push(thread.to_string());
            order.len() - 1
        }
    }
}

/// The reviews of the escalations `steps` ask for, queued for the review requests to come.
fn queue_reviews(shared: &Shared, steps: &[ModelStep]) {
    let mut reviews = shared.reviews.lock().expect("reviews lock");
    for step in steps {
        if let ModelStep::Shell {
            escalate: true,
            review,
            ..
        } = step
        {
            reviews.push_back(review.clone().unwrap_or_else(Review::unscripted));
        }
    }
}

fn event_stream(body: String) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
            (header::CONNECTION, "close"),
        ],
        body,
    )
        .into_response()
}

/// Codex's automatic reviewer asks for a structured answer: `text.format` is a JSON schema
/// whose properties include `outcome` (with `risk_level`, `user_authorization`, `rationale`).
/// The review's schema has an `outcome` field; a turn's own `outputSchema` travels the same way
/// (also named `codex_output_schema`), so a client schema with an `outcome` field would be taken
/// for a review — no driver measured here asks for one.
fn is_review_request(body: &Value) -> bool {
    let format = &body["text"]["format"];
    format["type"] == "json_schema" && format["schema"]["properties"].get("outcome").is_some()
}

/// The name Codex gives a JSON-schema `text.format` (a turn's `outputSchema`; measured, 0.169).
const OUTPUT_SCHEMA_NAME: &str = "codex_output_schema";

/// Answer a review request with the review of the oldest escalation not yet reviewed (deny when
/// the script gave none, or when no escalation is waiting: a review never allows by default).
fn answer_review(shared: &Shared, record: &mut RecordedRequest) -> Response {
    let review = shared
        .reviews
        .lock()
        .expect("reviews lock")
        .pop_front()
        .unwrap_or_else(Review::unscripted);
    let steps = [ModelStep::Message {
        text: review.model_answer().to_string(),
    }];
    let ids = sse::ResponseIds {
        stem: format!(
            "review_{}",
            shared.records.lock().expect("records lock").len()
        ),
    };
    let rendered = sse::render(
        &steps,
        &TemplateContext::default(),
        &tools::Offered::default(),
        &ids,
        None,
    );
    record.answer = format!("review-{}", if review.allows() { "allow" } else { "deny" });
    event_stream(rendered.body)
}
