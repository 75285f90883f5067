//! What the benches share: reading a process's memory and CPU from `/proc`, the MongoDB
//! resource, the repository's root. Each bench includes it with `#[path]`; not every bench
//! uses all of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use kube::api::{ApiResource, GroupVersionKind};

/// `mongodb.com/v1` MongoDB (plural `mongodb`, as the upstream CRD says).
pub(crate) fn mongodb() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("mongodb.com", "v1", "MongoDB"),
        "mongodb",
    )
}

/// The repository's root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Resident and peak resident memory of a process, in KiB.
pub(crate) fn rss_kib(pid: u32) -> (u64, u64) {
    let f = status_kib(pid);
    (f("VmRSS:"), f("VmHWM:"))
}

/// A reader of `/proc/PID/status` fields, in KiB (0 when absent).
pub(crate) fn status_kib(pid: u32) -> impl Fn(&str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    move |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

/// CPU time a process has used (utime + stime), in seconds; 0 when it is gone.
pub(crate) fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name (field 2) may hold spaces: count fields after its closing paren.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the paren.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) as f64 / clock_ticks()
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 { hz as f64 } else { 100.0 }
}

/// MiB, from KiB.
pub(crate) fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
