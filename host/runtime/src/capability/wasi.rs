//! WASI, linked because components from most languages import it (Python, JavaScript, C,
//! Go), with a context that grants only what language runtimes need to start and run:
//!
//! | WASI interface | what a plugin gets |
//! | --- | --- |
//! | `wasi:clocks/wall-clock` | the host's real wall clock (timestamps in status, logs) |
//! | `wasi:clocks/monotonic-clock` | the host's monotonic clock; a sleep on it is a pollable the call's wall-clock backstop ([`crate::limits::WALL_CLOCK_FACTOR`] times the deadline) cuts, so no sleep outlives a call |
//! | `wasi:random/*` | seeded random bytes (hash seeds of Python, Go, JS), at most [`MAX_RANDOM_BYTES`] per request |
//! | `wasi:cli/environment` | one argument, the plugin's name (`argv[0]`); no variables, no working directory |
//! | `wasi:cli/std{in,out,err}` | stdin closed, stdout discarded (plugins log through `host.log`); stderr's first [`STDERR_HEAD_BYTES`] and last [`STDERR_TAIL_BYTES`] kept for a failed call's error ([`StderrTail`]) |
//! | `wasi:filesystem/*` | no preopened directory: every path fails |
//! | `wasi:sockets/*` | TCP and UDP sockets refused at creation, every address denied, no name lookup |
//!
//! Both clocks are needed: Go's and Python's runtimes read them at start, and a plugin
//! stamping `lastTransitionTime` needs the wall clock. Neither gives more than the host's
//! `date`; there is no CPU-time or process clock in WASI 0.2 to leak the host's load.
//!
//! `argv[0]` is set because language runtimes and libraries read it at start (Go's
//! `k8s.io/klog` indexes `os.Args[0]` in `init` and panics on an empty argv). Stderr is
//! kept because a runtime's last words (a Go panic in `init`, a Rust panic message) are
//! what a plugin author needs when instantiation or a call traps; only its tail, so a
//! guest writing without end costs the host a few KiB.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use kubewasm_core::sync::lock;
use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Largest `get-random-bytes` request served (1 MiB); a larger one traps the call.
/// wasmtime-wasi's default (64 MiB) is allocated by the host outside the plugin's memory
/// cap, per request; language runtimes ask for a few KiB (JavaScript's `getRandomValues`
/// is limited to 64 KiB by its specification).
pub(crate) const MAX_RANDOM_BYTES: u64 = 1 << 20;

/// Most WASI handles (streams, pollables, descriptors) one plugin instance may hold at
/// once. The table lives in the host's memory, outside the plugin's memory cap, and
/// wasmtime-wasi's default lets it grow to 1,000,000 entries (~100 MiB); language runtimes
/// hold a few dozen (stdio streams, a pollable per pending sleep). A plugin that opens
/// more gets WASI's resource-exhausted error.
pub(crate) const MAX_WASI_HANDLES: usize = 4096;

/// Per-store state of the WASI capability.
pub(crate) struct WasiState {
    ctx: WasiCtx,
    table: ResourceTable,
    stderr: StderrTail,
}

impl WasiState {
    /// Instantiate: a deny-all context but for the clocks, random, `argv[0]` (`plugin`) and
    /// a stderr tail. `WasiCtx::builder()` grants no directories, environment or stdio
    /// unless asked; sockets are refused at creation, so a plugin never holds an OS socket
    /// (a hostile one cannot exhaust the host's file descriptors), whatever wasmtime-wasi's
    /// defaults become.
    pub(crate) fn new(plugin: &str) -> Self {
        let stderr = StderrTail::default();
        WasiState {
            ctx: WasiCtx::builder()
                .arg(plugin)
                .stderr(stderr.clone())
                .allow_tcp(false)
                .allow_udp(false)
                .allow_ip_name_lookup(false)
                .socket_addr_check(|_, _| Box::pin(async { false }))
                .max_random_size(MAX_RANDOM_BYTES)
                .build(),
            table: {
                let mut table = ResourceTable::new();
                table.set_max_capacity(MAX_WASI_HANDLES);
                table
            },
            stderr,
        }
    }

    /// What the guest wrote to stderr (its tail).
    pub(crate) fn stderr(&self) -> &StderrTail {
        &self.stderr
    }

    /// The view wasmtime-wasi's host functions use.
    pub(crate) fn view(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }
}

/// Bytes of the guest's stderr kept from its start (a Go panic's message comes first,
/// its goroutine trace after) ...
pub(crate) const STDERR_HEAD_BYTES: usize = 512;
/// ... and from its end (a Rust panic's message, the last lines of a log), for a failed
/// call's error.
pub(crate) const STDERR_TAIL_BYTES: usize = 2048;
/// What one write may carry (wasmtime copies that much guest memory per write).
const STDERR_WRITE_PERMIT: usize = 4096;

/// The guest's stderr, of which only the first [`STDERR_HEAD_BYTES`] and the last
/// [`STDERR_TAIL_BYTES`] are kept. Writes always succeed (a runtime that cannot write its
/// panic would trap elsewhere, or loop).
#[derive(Clone, Default)]
pub(crate) struct StderrTail(Arc<Mutex<Kept>>);

#[derive(Default)]
struct Kept {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    /// Whether bytes between the head and the tail were dropped.
    skipped: bool,
}

impl StderrTail {
    fn push(&self, mut data: &[u8]) {
        let mut kept = lock(&self.0);
        let room = STDERR_HEAD_BYTES - kept.head.len();
        if room > 0 {
            let (head, rest) = data.split_at(room.min(data.len()));
            kept.head.extend_from_slice(head);
            data = rest;
        }
        let keep = &data[data.len().saturating_sub(STDERR_TAIL_BYTES)..];
        let over = (kept.tail.len() + keep.len()).saturating_sub(STDERR_TAIL_BYTES);
        if over > 0 || keep.len() < data.len() {
            kept.skipped = true;
        }
        let drop = over.min(kept.tail.len());
        kept.tail.drain(..drop);
        kept.tail.extend(keep);
    }

    /// Forget what was written (a new call starts).
    pub(crate) fn clear(&self) {
        *lock(&self.0) = Kept::default();
    }

    /// What the guest wrote, its non-blank lines quoted with control characters escaped
    /// (one line of text whatever the guest wrote), `…` where bytes were dropped; `None`
    /// when it wrote nothing but whitespace.
    pub(crate) fn excerpt(&self) -> Option<String> {
        let kept = lock(&self.0);
        let (a, b) = kept.tail.as_slices();
        let mut lines: Vec<String> = Vec::new();
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        if kept.skipped {
            // The head ends and the tail starts mid-line: drop those fragments unless
            // they are all there is.
            let head = text(&kept.head);
            let mut head: Vec<&str> = head.lines().collect();
            if head.len() > 1 {
                head.pop();
            }
            lines.extend(head.iter().map(|l| l.to_string()));
            lines.push("…".into());
            let tail = text(&[a, b].concat());
            let mut tail: Vec<&str> = tail.lines().collect();
            if tail.len() > 1 {
                tail.remove(0);
            }
            lines.extend(tail.iter().map(|l| l.to_string()));
        } else {
            let all = text(&[&kept.head[..], a, b].concat());
            lines.extend(all.lines().map(str::to_string));
        }
        // Blank lines (Go puts one after its panic message) say nothing.
        lines.retain(|l| !l.trim().is_empty());
        if lines.iter().all(|l| l == "…") {
            return None;
        }
        let escaped: Vec<String> = lines.iter().map(|l| escape(l)).collect();
        Some(format!("\"{}\"", bounded(&escaped.join("\\n"))))
    }
}

/// `line` inside double quotes: control characters (terminal escapes, carriage returns)
/// as `\t` or `\u{1b}`, quotes and backslashes escaped; the rest as written.
fn escape(line: &str) -> String {
    let quoted = line.replace('\\', "\\\\").replace('"', "\\\"");
    // Control and display-changing characters: as every plugin text is made inert.
    kubewasm_core::excerpt::excerpt(&quoted, usize::MAX).into_owned()
}

/// Longest excerpt an error carries: escaping can make a control character ten (`\u{1b}`).
const STDERR_EXCERPT_MAX: usize = 4 * (STDERR_HEAD_BYTES + STDERR_TAIL_BYTES) / 3;

/// `text` cut to [`STDERR_EXCERPT_MAX`] bytes: its first quarter and its last three
/// quarters, `…` between (at character boundaries).
fn bounded(text: &str) -> String {
    if text.len() <= STDERR_EXCERPT_MAX {
        return text.to_string();
    }
    let mut head = STDERR_EXCERPT_MAX / 4;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - (STDERR_EXCERPT_MAX - STDERR_EXCERPT_MAX / 4);
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{}…{}", &text[..head], &text[tail..])
}

impl OutputStream for StderrTail {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(STDERR_WRITE_PERMIT)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for StderrTail {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for StderrTail {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for StderrTail {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for StderrTail {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

/// Link: add WASI p2 to the engine's linker.
pub(crate) fn link<T: WasiView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime_wasi::p2::bindings::random::{insecure, random};

    #[test]
    fn the_handle_table_is_capped() {
        let mut state = WasiState::new("test");
        let table = state.view().table;
        for i in 0..MAX_WASI_HANDLES {
            assert!(table.push(i).is_ok(), "entry {i}");
        }
        let err = table.push(0usize).unwrap_err();
        assert!(
            matches!(err, wasmtime::component::ResourceTableError::Full),
            "{err}"
        );
    }

    #[test]
    fn random_requests_are_capped() {
        let mut state = WasiState::new("test");
        let r = state.ctx.random();
        let max = MAX_RANDOM_BYTES;
        assert_eq!(
            random::Host::get_random_bytes(r, max).unwrap().len() as u64,
            max
        );
        assert!(random::Host::get_random_bytes(r, max + 1).is_err());
        assert!(insecure::Host::get_insecure_random_bytes(r, max + 1).is_err());
        // Seeded: two requests differ.
        let a = random::Host::get_random_bytes(r, 32).unwrap();
        assert_ne!(a, random::Host::get_random_bytes(r, 32).unwrap());
    }

    #[test]
    fn stderr_keeps_its_first_and_last_lines_escaped() {
        let tail = StderrTail::default();
        assert_eq!(tail.excerpt(), None);
        tail.push(b"\n  \n");
        assert_eq!(tail.excerpt(), None);
        tail.push(b"panic: boom \x1b[31m\"red\"\n\n\tat init\n");
        assert_eq!(
            tail.excerpt().as_deref(),
            Some(r#""panic: boom \u{1b}[31m\"red\"\n\tat init""#)
        );
        // Many lines: the first and the last ones, the gap marked.
        tail.clear();
        for i in 0..400 {
            tail.push(format!("line {i}\n").as_bytes());
        }
        let e = tail.excerpt().expect("excerpt");
        assert!(e.starts_with("\"line 0\\nline 1\\n"), "{e}");
        assert!(e.contains("\\n…\\n"), "{e}");
        assert!(e.ends_with("\\nline 399\""), "{e}");
        assert!(e.len() <= STDERR_EXCERPT_MAX + 8, "{}", e.len());
        // Control characters escape to ten bytes each: still bounded.
        tail.clear();
        tail.push(&[0x1b; 1 << 16]);
        let e = tail.excerpt().expect("excerpt");
        assert!(e.starts_with("\"\\u{1b}") && e.contains('…'), "{e}");
        assert!(e.len() <= STDERR_EXCERPT_MAX + 8, "{}", e.len());
        // Megabytes in one write: bounded, the partial lines dropped.
        tail.clear();
        let long = "first words\n".to_string() + &"x".repeat(1 << 20) + "\nlast words";
        tail.push(long.as_bytes());
        tail.push(long.as_bytes());
        {
            let kept = lock(&tail.0);
            assert!(kept.head.len() <= STDERR_HEAD_BYTES);
            assert!(kept.tail.len() <= STDERR_TAIL_BYTES);
        }
        assert_eq!(
            tail.excerpt().as_deref(),
            Some("\"first words\\n…\\nlast words\"")
        );
    }
}
