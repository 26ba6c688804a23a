//! Ids shaped like Codex's: UUIDv7 threads/turns/items, `call_…` tool calls, hex chunk ids.

pub fn uuid_v7() -> String {
    uuid::Uuid::now_v7().to_string()
}

fn random_hex(len: usize) -> String {
    let mut hex = uuid::Uuid::new_v4().simple().to_string();
    hex.truncate(len);
    hex
}

pub fn call_id() -> String {
    format!("call_{}", random_hex(12))
}

pub fn message_id() -> String {
    format!("msg_{}", random_hex(32))
}

pub fn chunk_id() -> String {
    random_hex(6)
}

/// The short id a thread's probe files carry: derived from the thread id (the same formula the
/// mock model API uses), so a resumed thread keeps its id and parallel runs never collide.
pub fn probe_id_for(thread_id: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(thread_id.as_bytes());
    hex::encode(&digest[..4])
}
