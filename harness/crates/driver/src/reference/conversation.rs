//! A run's turns, one after another within one session: each turn's end decides the next turn
//! (a plan review, a question the task answers) or the run's end.

use super::turn::{self, RunState, TurnOutcome, TurnRequest};
use super::{control::Controls, DriverConfig};
use super::{emit, emit_resolved, interrupted, recovery, session, stop, succeeded, Stop};
use crate::event_log::EventLog;
use crate::launch::LaunchPlan;
use crate::task::{PlanReview, Task};
use graders::events::{
    ApprovalKind, ApprovalRequested, Body, Ending, Mode, Outcome, ResultProposed, RunEnded,
};

/// What a run carries from turn to turn, and from one session to the next.
pub(super) struct Conversation<'a> {
    task: &'a Task,
    pub(super) state: RunState,
    reviews: std::slice::Iter<'a, PlanReview>,
    plans_seen: u32,
    last_message: Option<String>,
}

impl<'a> Conversation<'a> {
    pub(super) fn new(task: &'a Task, controls: Controls) -> Self {
        Self {
            task,
            state: RunState::new(task.answers.iter().cloned().collect(), controls),
            reviews: task.plan_reviews.iter(),
            plans_seen: 0,
            last_message: None,
        }
    }

    /// Whether another turn may start: not after the user interrupted, nor past the task's
    /// turn budget.
    fn before_turn(&mut self) -> Result<(), Stop> {
        self.state.controls.poll();
        if self.state.controls.interrupt_requested() {
            return Err(interrupted(
                "the run was interrupted before its next turn started",
            ));
        }
        if self.state.turn_index >= self.task.max_turns {
            return Err(stop(
                Ending::FailedPermanently,
                false,
                "max_turns_exceeded",
                &format!("the task allows {} turns", self.task.max_turns),
            ));
        }
        Ok(())
    }

    /// A turn's end by its status: only a completed turn lets the run go on.
    fn turn_ended(&mut self, outcome: &TurnOutcome) -> Result<(), Stop> {
        if self.state.controls.interrupt_requested() {
            return Err(interrupted(&format!(
                "the user interrupted the run; turn {} ended `{}`",
                outcome.turn_id, outcome.status
            )));
        }
        if outcome.last_message.is_some() {
            self.last_message = outcome.last_message.clone();
        }
        match outcome.status.as_str() {
            "completed" => Ok(()),
            "failed" => Err(stop(
                Ending::FailedPermanently,
                true,
                "turn_failed",
                outcome.error.as_deref().unwrap_or("the turn failed"),
            )),
            other => Err(stop(
                Ending::FailedPermanently,
                true,
                "turn_not_completed",
                &format!(
                    "turn {} ended `{other}`{}",
                    outcome.turn_id,
                    outcome
                        .error
                        .as_deref()
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default()
                ),
            )),
        }
    }

    /// After a completed turn: the next turn to run, or `None` when the run has succeeded.
    /// A plan turn's plan is reviewed; a result the task can answer is answered; a run
    /// without a result asks the user to review its last message.
    fn after_turn(
        &mut self,
        plan: &LaunchPlan,
        request: &TurnRequest,
        outcome: &TurnOutcome,
        log: &mut EventLog,
    ) -> Result<Option<TurnRequest>, Stop> {
        let plan_turn = request.params.collaboration_mode.as_deref() == Some("plan");
        if let (true, Some((item_id, text))) = (plan_turn, &outcome.plan) {
            return self.review_plan(plan, item_id, text, log);
        }
        if let Some(result) = &outcome.new_result {
            let asks_user = result.outcome == Outcome::Blocked
                && result.owner.as_deref() == Some("user")
                && self.task.mode == Mode::Ask;
            if asks_user {
                if let Some(answer) = self.state.answers.pop_front() {
                    self.state.results.reset();
                    return Ok(Some(TurnRequest {
                        text: answer,
                        params: plan.turn_params.clone(),
                    }));
                }
            }
            return Ok(None);
        }
        if self.state.results.accepted().is_some() {
            // A result from an earlier turn still stands.
            return Ok(None);
        }
        emit(
            log,
            Body::ResultProposed(ResultProposed {
                outcome: Outcome::NeedsReview,
                summary: self
                    .last_message
                    .as_deref()
                    .map(|m| crate::rpc::excerpt(m, 500))
                    .unwrap_or_else(|| "the run ended without reporting a result".into()),
                owner: Some("user".into()),
                action: Some("review the run's last message".into()),
            }),
        )?;
        Ok(None)
    }

    /// A plan turn's plan (`item_id`, `text`), reviewed as the task says: approved (the
    /// follow-up turn next), revised (another plan turn next), or, with no review left,
    /// proposed to the user (the run ends).
    fn review_plan(
        &mut self,
        plan: &LaunchPlan,
        item_id: &str,
        text: &str,
        log: &mut EventLog,
    ) -> Result<Option<TurnRequest>, Stop> {
        self.plans_seen += 1;
        let request_id = format!("plan-{}", self.plans_seen);
        emit(
            log,
            Body::ApprovalRequested(ApprovalRequested {
                request_id: request_id.clone(),
                kind: ApprovalKind::Plan,
                item_id: Some(item_id.to_string()),
                command: None,
                reason: Some(crate::rpc::excerpt(text, 500)),
                available_decisions: None,
            }),
        )?;
        let (decision, following) = match self.reviews.next() {
            Some(PlanReview::Approve) => (
                "accept",
                TurnRequest {
                    text: self.task.follow_up_prompt.clone(),
                    params: plan
                        .follow_up_turn_params
                        .clone()
                        .unwrap_or_else(|| plan.turn_params.clone()),
                },
            ),
            Some(PlanReview::Revise { text }) => (
                "revise",
                TurnRequest {
                    text: text.clone(),
                    params: plan.turn_params.clone(),
                },
            ),
            None => {
                emit(
                    log,
                    Body::ResultProposed(ResultProposed {
                        outcome: Outcome::NeedsReview,
                        summary: crate::rpc::excerpt(text, 500),
                        owner: Some("user".into()),
                        action: Some("review the proposed plan".into()),
                    }),
                )?;
                return Ok(None);
            }
        };
        emit_resolved(log, request_id, decision)?;
        // A plan under review is not a final result, whatever the turn reported.
        self.state.results.reset();
        Ok(Some(following))
    }
}

/// The turns of one session, from `first`: each runs (recovered after a crash), its end
/// decides the next, until the run succeeds or stops.
pub(super) async fn run_turns(
    config: &DriverConfig,
    plan: &LaunchPlan,
    session: &mut session::Session,
    conversation: &mut Conversation<'_>,
    first: TurnRequest,
    log: &mut EventLog,
) -> Result<RunEnded, Stop> {
    let mut next = Some(first);
    while let Some(request) = next.take() {
        conversation.before_turn()?;
        let state = &mut conversation.state;
        let outcome = match turn::run(config, plan, session, state, &request, log).await {
            Ok(outcome) => outcome,
            Err(lost) => {
                match recovery::after_crash(config, plan, session, state, &request, lost, log)
                    .await?
                {
                    recovery::Recovered::Outcome(outcome) => outcome,
                    recovery::Recovered::Again(again) => {
                        next = Some(again);
                        continue;
                    }
                }
            }
        };
        conversation.turn_ended(&outcome)?;
        next = conversation.after_turn(plan, &request, &outcome, log)?;
    }
    Ok(succeeded())
}
