//! The run-event contract ([`events`]) and the graders that read a run's events and classify it.

pub mod events;
