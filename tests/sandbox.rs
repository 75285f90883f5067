//! Sandbox tests: hostile plugins against the real host (filled in below).
