//! Test cases: plugins run against YAML cases on an embedded API server (`kubewasm
//! test`), and `run`'s events recorded as cases (`run --record DIR`).
//!
//! - [`format`]: the case file format and its (de)serialization;
//! - [`record`]: the recorder writing each handled event as a case;
//! - `cluster`: a case's embedded API server, as the pipeline's cluster port;
//! - [`replay`]: running cases through `run`'s loader, approval, routing and pipeline
//!   (call, admission, preflight, server-side apply), and the report.

pub(crate) mod cluster;
pub(crate) mod format;
pub mod record;
pub mod replay;
