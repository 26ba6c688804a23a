//! Reading a 10 MB line must not allocate 10 MB: a counting global allocator records the peak
//! bytes live while the reader rejects the line. (Own test binary: the allocator is global.)

use graders::reader::{read_all, ReadError, ReaderConfig, StreamError};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
        PEAK.fetch_max(live, Ordering::SeqCst);
        // SAFETY: forwarding the caller's layout to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        // SAFETY: `ptr` was allocated by `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A reader over a long run of one byte that never materialises it.
struct Repeat {
    left: usize,
}

impl std::io::Read for Repeat {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.left);
        buf[..n].fill(b'x');
        self.left -= n;
        Ok(n)
    }
}

#[test]
fn a_ten_megabyte_line_is_rejected_without_allocating_it() {
    let header = r#"{"v":1,"seq":0,"run":"r","source":"driver","kind":"diagnostic","payload":{"level":"info","message":""#;
    let input = std::io::BufReader::new(std::io::Read::chain(
        header.as_bytes(),
        Repeat { left: 10 << 20 },
    ));
    let before = LIVE.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let err = read_all(input, ReaderConfig::default()).unwrap_err();
    let peak = PEAK.load(Ordering::SeqCst) - before;
    assert!(
        matches!(
            err,
            ReadError::Invalid(StreamError::LineTooLong { line: 1, .. })
        ),
        "{err}"
    );
    assert!(
        peak < 3 << 20,
        "peak allocation {peak} bytes while rejecting a 10 MB line"
    );
}
