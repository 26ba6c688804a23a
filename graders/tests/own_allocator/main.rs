//! The graders' tests that replace the global allocator, in a binary of their own: a counting
//! allocator sees every thread of its process, so tests of the other binary (`all`) running
//! beside these would count in their peaks, and counting there would slow every test down.

mod reader_memory;
