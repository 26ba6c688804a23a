//! Turning the app-server's item JSON into the event contract's reduced item: one reduction,
//! owned by the wire translator (`graders::wire::items`).

pub(crate) use graders::wire::items::reduce;
