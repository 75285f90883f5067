//! Property tests of intent decoding and the grant check (filled in below).
