//! A text cut to a bound of characters: what the wire translator keeps of a message or an
//! output, and the protocol of a message or an answer's schema error. Apart from both, so the
//! protocol does not depend on the translator for it.

/// The first `max` characters of `text`, with `…` when cut.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}
