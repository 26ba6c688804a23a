//! Reading a stdio JSON-RPC peer's output one line at a time on a background thread, so a
//! client of the fake (tests, benchmarks) can wait for a line with a timeout.

use std::io::{BufRead, BufReader, Read};
use std::thread::JoinHandle;

/// Read `output` line by line on a new thread and hand each line, as read (with its line
/// ending), to `deliver`. The thread ends at end of file, on a read error, or when `deliver`
/// returns `false` (the receiving side is gone).
pub fn forward_lines<R, F>(output: R, mut deliver: F) -> JoinHandle<()>
where
    R: Read + Send + 'static,
    F: FnMut(String) -> bool + Send + 'static,
{
    std::thread::spawn(move || {
        let mut reader = BufReader::new(output);
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if !deliver(line) {
                        break;
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::forward_lines;

    #[test]
    fn every_line_arrives_in_order_with_its_ending_then_the_thread_ends() {
        let (tx, rx) = std::sync::mpsc::channel();
        let input: &'static [u8] = b"{\"id\":1}\nsecond\nno newline";
        forward_lines(input, move |line| tx.send(line).is_ok())
            .join()
            .unwrap();
        let lines: Vec<String> = rx.iter().collect();
        assert_eq!(lines, ["{\"id\":1}\n", "second\n", "no newline"]);
    }

    #[test]
    fn reading_stops_once_the_receiver_refuses() {
        let (tx, rx) = std::sync::mpsc::channel();
        forward_lines(&b"a\nb\nc\n"[..], move |line| {
            let _ = tx.send(line);
            false
        })
        .join()
        .unwrap();
        assert_eq!(rx.iter().collect::<Vec<_>>(), ["a\n"]);
    }
}
