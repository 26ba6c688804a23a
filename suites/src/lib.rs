//! The conformance suites, declared as data.
