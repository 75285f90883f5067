//! Native test support (not compiled for wasm): a stand-in for the host's cache and log.
//!
//! In `cargo test`, [`host::get`](crate::host::get)/[`host::list`](crate::host::list) read
//! the objects given to [`set_objects`], and log lines are kept for [`take_logs`]. Both are
//! per thread, so tests running in parallel do not see each other's state.
//!
//! Log lines are also echoed to stderr (cargo test shows them for failing tests). A native
//! benchmark should call [`silence_logs`] first.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use crate::log::Level;
use crate::object::ObjectExt;

thread_local! {
    static OBJECTS: RefCell<Vec<Value>> = const { RefCell::new(Vec::new()) };
    static LOGS: RefCell<VecDeque<(Level, String)>> = const { RefCell::new(VecDeque::new()) };
}

/// At most this many log lines are kept per thread (the oldest are dropped).
pub const MAX_KEPT_LOGS: usize = 1000;

static SILENT: AtomicBool = AtomicBool::new(false);

/// Stops echoing and keeping log lines, on every thread (for native benchmarks).
pub fn silence_logs() {
    SILENT.store(true, Ordering::Relaxed);
}

/// Replaces the objects the native `host::get`/`host::list` see (this thread only).
pub fn set_objects(objects: Vec<Value>) {
    OBJECTS.with(|o| *o.borrow_mut() = objects);
}

/// Returns and clears the log lines written on this thread.
pub fn take_logs() -> Vec<(Level, String)> {
    LOGS.with(|l| std::mem::take(&mut *l.borrow_mut()).into())
}

pub(crate) fn record_log(level: Level, message: &str) {
    if SILENT.load(Ordering::Relaxed) {
        return;
    }
    eprintln!("[plugin {level:?}] {message}");
    LOGS.with(|l| {
        let mut l = l.borrow_mut();
        if l.len() >= MAX_KEPT_LOGS {
            l.pop_front();
        }
        l.push_back((level, message.to_owned()));
    });
}

fn same_kind(o: &Value, api_version: &str, kind: &str) -> bool {
    o.api_version() == Some(api_version) && o.kind() == Some(kind)
}

pub(crate) fn mock_get(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<String>, String> {
    Ok(OBJECTS.with(|o| {
        o.borrow()
            .iter()
            .find(|o| {
                same_kind(o, api_version, kind)
                    && o.namespace() == namespace
                    && o.name() == Some(name)
            })
            .map(Value::to_string)
    }))
}

pub(crate) fn mock_list(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    label_selector: Option<&str>,
) -> Result<Vec<String>, String> {
    let selector = label_selector
        .map(parse_selector)
        .transpose()?
        .unwrap_or_default();
    Ok(OBJECTS.with(|o| {
        o.borrow()
            .iter()
            .filter(|o| same_kind(o, api_version, kind))
            .filter(|o| namespace.is_none() || o.namespace() == namespace)
            .filter(|o| selector.iter().all(|req| req.matches(o)))
            .map(Value::to_string)
            .collect()
    }))
}

enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
}

impl Requirement {
    fn matches(&self, o: &Value) -> bool {
        match self {
            Requirement::Equals(k, v) => o.label(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => o.label(k) != Some(v.as_str()),
            Requirement::Exists(k) => o.label(k).is_some(),
            Requirement::NotExists(k) => o.label(k).is_none(),
        }
    }
}

/// Equality-based selectors only (`a=b`, `a==b`, `a!=b`, `a`, `!a`), like the mock needs.
fn parse_selector(s: &str) -> Result<Vec<Requirement>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            if p.contains(' ') || p.contains('(') {
                Err(format!(
                    "the native test host supports only equality selectors, not {p:?}"
                ))
            } else if let Some((k, v)) = p.split_once("!=") {
                Ok(Requirement::NotEquals(k.to_owned(), v.to_owned()))
            } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                Ok(Requirement::Equals(k.to_owned(), v.to_owned()))
            } else if let Some(k) = p.strip_prefix('!') {
                Ok(Requirement::NotExists(k.to_owned()))
            } else {
                Ok(Requirement::Exists(p.to_owned()))
            }
        })
        .collect()
}
