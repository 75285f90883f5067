//! Test cases: plugins run offline against YAML cases (`kubewasm test`), and `run`'s
//! events recorded as cases (`run --record DIR`).
//!
//! - [`format`]: the case file format and its (de)serialization;
//! - [`record`]: the recorder writing each handled event as a case;
//! - [`replay`]: running cases through `run`'s call path (its loader and approval, its
//!   scoped read view, its admission), and the report.

pub mod format;
pub mod record;
pub mod replay;
