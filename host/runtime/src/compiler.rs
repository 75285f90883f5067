//! Where plugins are compiled: in this process, or in a worker process.
//!
//! Compiling is the host's most memory-hungry step (Cranelift's working set is hundreds of
//! MiB for a Python component) and the compiler is the largest part of the binary's code.
//! Once it has run in a process, its heap and code pages stay resident there. A
//! long-running host therefore compiles in a worker ([`Compiler::Worker`]): this same
//! executable started with a hidden subcommand that reads the wasm on stdin, writes the
//! serialized component on stdout ([`serve`]) and exits. The host never holds the
//! compiler's memory, and a compile that runs out of memory kills the worker, not the host.
//! One-shot commands (`inspect`, `test`) compile in process ([`Compiler::InProcess`]).
//!
//! The worker gives up what it does not need: it starts with an empty environment and no
//! descriptor of the host's beyond its three pipes, under rlimits ([`Worker::limit`]), and
//! enters a Landlock sandbox before it reads its input ([`landlock`]): it can open no path
//! (the host's token, the code cache key), only read its stdin and write its stdout.
//!
//! A worker that cannot be started (a transient `fork`/`exec` failure: out of memory or
//! processes) is tried again a few times with backoff, then the plugin is refused with
//! the reason; a host never falls back to compiling in its own process, where none of the
//! worker's limits would hold.

pub mod landlock;

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wasmtime::component::Component;

use crate::artifact::{Artifact, ArtifactWriter, Origin};
use crate::codecache::Source;
use crate::engine::PluginEngine;
use crate::error::{EngineError, Error};
use crate::loader::MAX_COMPONENT_BYTES;

/// Largest serialized component accepted from a worker.
const MAX_ARTIFACT_BYTES: u64 = 1 << 30;
/// Largest error message read from a worker.
const MAX_WORKER_STDERR: u64 = 64 << 10;
/// The worker's exit status when the wasm does not compile (its message is on stderr);
/// any other failure exits 1.
pub(crate) const EXIT_NOT_COMPILABLE: i32 = 2;
/// How long a worker may take to compile one plugin before it is stopped. The largest
/// components we build (Python, ~35 MB) compile in seconds; a component crafted to compile
/// slowly is bounded by this, not only by wasmparser's size limits.
pub const DEFAULT_COMPILE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// The address space a compile worker may map (`RLIMIT_AS`), by default 2 GiB.
///
/// Compiling the largest component we build (Python, 19 MB) peaks at 330 MiB resident and
/// 485 MiB of address space (measured with the debug build's worker, whose own image is
/// 230 MB of it); 2 GiB leaves four times that for bigger honest components, while a
/// crafted one fails its allocations (the worker aborts, the file is refused) instead of
/// growing until the kernel's OOM killer picks a victim: under cgroup v2 with
/// `memory.oom.group`, the whole container, host included. Address space bounds resident
/// memory, so a deployment whose memory limit covers the host's budget plus this never
/// reaches its limit through the worker.
pub const DEFAULT_COMPILE_ADDRESS_SPACE: u64 = 2 << 30;

/// How plugins are compiled.
#[derive(Debug, Clone, Default)]
pub enum Compiler {
    /// On a blocking thread of this process.
    #[default]
    InProcess,
    /// In a worker process (see the module documentation).
    Worker(Worker),
}

/// The command that starts a compile worker.
#[derive(Debug, Clone)]
pub struct Worker {
    program: PathBuf,
    args: Vec<OsString>,
    /// How long one compile may take.
    timeout: std::time::Duration,
    /// The worker's address-space limit, bytes.
    address_space: u64,
}

/// Tries to start a worker before the plugin is refused, and the wait before the first
/// retry (doubling): a `fork` or `exec` failing for want of memory or processes often
/// passes within a second.
const SPAWN_TRIES: u32 = 4;
const SPAWN_BACKOFF: std::time::Duration = std::time::Duration::from_millis(100);

impl Worker {
    /// This executable started with `args` (the subcommand that calls [`serve`]). On Linux
    /// it is `/proc/self/exe`: the image that is running, even if the file on disk was
    /// replaced since (an upgrade in place), so the worker's engine always matches ours.
    pub fn this_executable<I, S>(args: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let proc_exe = Path::new("/proc/self/exe");
        let program = if proc_exe.exists() {
            proc_exe.to_path_buf()
        } else {
            std::env::current_exe().map_err(|source| Error::Io {
                context: "finding this executable for the compile worker".into(),
                source,
            })?
        };
        Ok(Worker::new(program, args))
    }

    /// `program` started with `args`; it must speak [`serve`]'s protocol.
    pub fn new<I, S>(program: impl Into<PathBuf>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Worker {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            timeout: DEFAULT_COMPILE_TIMEOUT,
            address_space: DEFAULT_COMPILE_ADDRESS_SPACE,
        }
    }

    /// Stop a compile that takes longer than `timeout` (default
    /// `DEFAULT_COMPILE_TIMEOUT`, 5 minutes); the plugin file is then refused.
    pub fn with_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Limit the worker's address space to `bytes` (default
    /// [`DEFAULT_COMPILE_ADDRESS_SPACE`]); a compile that needs more fails and the plugin
    /// file is refused.
    pub fn with_address_space(mut self, bytes: u64) -> Self {
        self.address_space = bytes;
        self
    }

    /// The limits the worker process runs under, applied in the child between `fork` and
    /// `exec`:
    /// - `RLIMIT_AS`: its address space ([`Worker::with_address_space`]);
    /// - `RLIMIT_CPU`: the timeout's worth of CPU time on every CPU (a soft limit sends
    ///   SIGXCPU, the hard one a second later SIGKILL): a backstop that stops the worker
    ///   even if the host that times it out is gone (killed, so `kill_on_drop` did not
    ///   run; `PR_SET_PDEATHSIG` is not used: it fires when the *thread* that forked
    ///   exits, and tokio retires idle threads);
    /// - `oom_score_adj` 1000: should the machine or container run out of memory anyway,
    ///   the worker is the kernel's first choice, not the host;
    /// - every descriptor above stderr close-on-exec: the worker inherits its three pipes
    ///   and nothing else the host holds (sockets to the API server, the cache key's file).
    ///
    /// Its own cgroup is not attempted: a container's cgroup is read-only in the usual
    /// deployments, and a writable one would need the host moved into a leaf cgroup of
    /// its own first (cgroup v2 gives controllers only to cgroups without processes).
    /// The address-space limit bounds the worker's memory without one.
    fn limit(&self, command: &mut tokio::process::Command) {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        let cpu = self.timeout.as_secs().max(1).saturating_mul(cpus);
        let limits = [
            (libc::RLIMIT_AS, self.address_space, self.address_space),
            (libc::RLIMIT_CPU, cpu, cpu.saturating_add(1)),
        ];
        let oom_path = c"/proc/self/oom_score_adj";
        #[allow(unsafe_code)]
        // SAFETY: the closure runs in the forked child before `exec`, where only
        // async-signal-safe functions may be called: `setrlimit`, `open`, `write`,
        // `close`, `close_range`, `getrlimit` and `fcntl` are system calls that allocate
        // nothing and take no lock; everything they read (`limits`, the path) was built
        // before the fork and is moved into the closure. The descriptors they touch are
        // the child's own copies: marking them close-on-exec changes nothing in the host.
        // std's pipe that reports a failed `exec` is close-on-exec already, so it still
        // reports one (closing descriptors outright would lose that report). A failure of
        // the OOM score is ignored (a refinement); `setrlimit` or the descriptors failing
        // fails the spawn, which `compile` retries, then refuses the plugin.
        unsafe {
            command.pre_exec(move || {
                cloexec_from(3)?;
                for (resource, soft, hard) in limits {
                    let rlim = libc::rlimit {
                        rlim_cur: soft,
                        rlim_max: hard,
                    };
                    if libc::setrlimit(resource, &rlim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                let fd = libc::open(oom_path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd >= 0 {
                    libc::write(fd, b"1000".as_ptr().cast(), 4);
                    libc::close(fd);
                }
                Ok(())
            });
        }
    }
}

impl Compiler {
    /// Compile checked component bytes, saying where ([`Source::Compiled`] or
    /// [`Source::CompiledInWorker`], with the worker's artifact for the code cache).
    /// `code_dir` is where a worker's output is kept as an unnamed file (see
    /// [`crate::artifact`]).
    pub(crate) async fn compile(
        &self,
        engine: &PluginEngine,
        path: &Path,
        bytes: Vec<u8>,
        code_dir: Option<&Path>,
    ) -> Result<(Component, Source, Option<Artifact>), Error> {
        let here = |bytes| async move {
            compile_here(engine, path, bytes)
                .await
                .map(|c| (c, Source::Compiled, None))
        };
        let worker = match self {
            Compiler::Worker(w) => w,
            Compiler::InProcess => return here(bytes).await,
        };
        match worker.run_retrying(&bytes, code_dir).await {
            Ok(artifact) => {
                let eng = engine.clone();
                tokio::task::spawn_blocking(move || artifact.load(&eng).map(|c| (c, artifact)))
                    .await
                    .map_err(|source| EngineError::Task {
                        what: "loading compiled code",
                        source,
                    })?
                    .map(|(c, artifact)| (c, Source::CompiledInWorker, Some(artifact)))
                    .map_err(|e| EngineError::WorkerOutput(e).into())
            }
            Err(WorkerFailure::NotCompilable(reason)) => Err(Error::NotWasm {
                path: path.to_path_buf(),
                reason,
            }),
            Err(WorkerFailure::TimedOut) => Err(Error::CompileTimeout {
                path: path.to_path_buf(),
                limit: worker.timeout,
            }),
            Err(WorkerFailure::Failed(reason)) => Err(EngineError::Worker {
                path: path.to_path_buf(),
                reason,
            }
            .into()),
            Err(WorkerFailure::Unavailable(e)) => Err(EngineError::Worker {
                path: path.to_path_buf(),
                reason: format!(
                    "{} could not be started ({SPAWN_TRIES} tries): {e}; the plugin is not compiled in the host's own process",
                    worker.program.display()
                ),
            }
            .into()),
        }
    }
}

enum WorkerFailure {
    /// The wasm does not compile: the compiler's message.
    NotCompilable(String),
    /// The worker crashed, was killed, or said something unreadable.
    Failed(String),
    /// The worker took longer than its timeout and was stopped.
    TimedOut,
    /// The worker could not be started.
    Unavailable(std::io::Error),
}

/// Mark every descriptor from `first` on close-on-exec, in a forked child before `exec`
/// (see the SAFETY comment of [`Worker::limit`]): `close_range(CLOSE_RANGE_CLOEXEC)`
/// (Linux 5.11), else each descriptor below the soft `RLIMIT_NOFILE` (at most 65,536
/// `fcntl`s; a descriptor past that would have to be opened past the limit first).
#[allow(unsafe_code)]
unsafe fn cloexec_from(first: libc::c_int) -> std::io::Result<()> {
    // SAFETY: plain integers in; the caller is a forked child (async-signal-safe calls).
    unsafe {
        if libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        ) == 0
        {
            return Ok(());
        }
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let last = rl.rlim_cur.min(1 << 16) as libc::c_int;
        for fd in first..last {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
        Ok(())
    }
}

impl Worker {
    /// [`Worker::run`], started again with backoff while the worker cannot be started.
    async fn run_retrying(
        &self,
        wasm: &[u8],
        code_dir: Option<&Path>,
    ) -> Result<Artifact, WorkerFailure> {
        let mut wait = SPAWN_BACKOFF;
        for _ in 1..SPAWN_TRIES {
            match self.run(wasm, code_dir).await {
                Err(WorkerFailure::Unavailable(e)) => {
                    tracing::warn!(program = %self.program.display(), error = %e,
                        retry_in_ms = wait.as_millis() as u64, "cannot start a compile worker; trying again");
                    tokio::time::sleep(wait).await;
                    wait = wait.saturating_mul(2);
                }
                other => return other,
            }
        }
        self.run(wasm, code_dir).await
    }

    async fn run(&self, wasm: &[u8], code_dir: Option<&Path>) -> Result<Artifact, WorkerFailure> {
        let mut command = tokio::process::Command::new(&self.program);
        self.limit(&mut command);
        let mut child = command
            .args(&self.args)
            // It needs nothing from the host's environment (credentials included).
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // An abandoned load (shutdown, a reload that replaced the file) stops its worker.
            .kill_on_drop(true)
            .spawn()
            .map_err(WorkerFailure::Unavailable)?;
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(WorkerFailure::Failed("no pipes to the worker".into()));
        };
        let feed = async move {
            // A worker that fails before reading everything closes the pipe: its exit
            // status and message say why, so the write error itself is not the story.
            let _ = stdin.write_all(wasm).await;
            drop(stdin);
        };
        // Both pipes are drained to the end (what is over the bounds is discarded), so the
        // worker never blocks on a full pipe while we wait for it; if keeping the output
        // fails, its pipe is dropped, so the worker's next write fails and it exits. The
        // output goes straight into the artifact's file: no whole copy is held in memory.
        let mut err = Vec::new();
        let read_out = async {
            let mut out = ArtifactWriter::new(code_dir);
            let mut stdout = stdout;
            let mut buf = vec![0u8; 64 << 10];
            let mut over = false;
            loop {
                let n = stdout.read(&mut buf).await?;
                if n == 0 {
                    break;
                }
                over |= out.len() + n as u64 > MAX_ARTIFACT_BYTES;
                if !over {
                    out.write_all(&buf[..n])?;
                }
            }
            Ok::<_, std::io::Error>((out, over))
        };
        let read_err = read_bounded(stderr, MAX_WORKER_STDERR, &mut err);
        let work = async {
            let ((), out_res, _) = tokio::join!(feed, read_out, read_err);
            (out_res, child.wait().await)
        };
        let finished = tokio::time::timeout(self.timeout, work).await;
        let Ok((out_res, status)) = finished else {
            // Stopped and reaped here; the artifact's unnamed file went with `work`.
            let _ = child.kill().await;
            return Err(WorkerFailure::TimedOut);
        };
        let status = status.map_err(|e| WorkerFailure::Failed(format!("waiting for it: {e}")))?;
        // The compiler quotes the component's names: the plugin's text.
        let message = crate::plugin::plugin_text(String::from_utf8_lossy(&err).trim());
        if status.code() == Some(EXIT_NOT_COMPILABLE) {
            return Err(WorkerFailure::NotCompilable(message));
        }
        // Our side failing (a full disk) explains the worker's failure to write: said first.
        let (out, over) = out_res
            .map_err(|e| WorkerFailure::Failed(format!("reading or keeping its output: {e}")))?;
        match status.code() {
            Some(0) if over => Err(WorkerFailure::Failed(format!(
                "its output is over {MAX_ARTIFACT_BYTES} bytes"
            ))),
            // Complete output of a worker that exited 0: see `Origin::CompileWorker`.
            Some(0) => Ok(out.finish(Origin::CompileWorker)),
            Some(code) => Err(WorkerFailure::Failed(format!(
                "exit status {code}: {message}"
            ))),
            None => {
                use std::os::unix::process::ExitStatusExt;
                let signal = status.signal().unwrap_or(0);
                let hint = match signal {
                    libc::SIGKILL => " (killed: out of memory?)".to_string(),
                    // Rust aborts when an allocation fails: the address-space limit.
                    libc::SIGABRT => format!(
                        " (aborted: out of memory under the compile worker's address-space \
                         limit of {} MiB?)",
                        self.address_space >> 20
                    ),
                    libc::SIGXCPU => " (out of CPU time)".to_string(),
                    _ => String::new(),
                };
                Err(WorkerFailure::Failed(format!(
                    "terminated by signal {signal}{hint}{}{message}",
                    if message.is_empty() { "" } else { ": " }
                )))
            }
        }
    }
}

/// Read up to `limit` bytes into `buf`, then discard the rest until end of file.
async fn read_bounded(
    pipe: impl tokio::io::AsyncRead + Unpin,
    limit: u64,
    buf: &mut Vec<u8>,
) -> std::io::Result<()> {
    let mut head = pipe.take(limit);
    head.read_to_end(buf).await?;
    tokio::io::copy(&mut head.into_inner(), &mut tokio::io::sink()).await?;
    Ok(())
}

/// Compile on a blocking thread of this process.
async fn compile_here(
    engine: &PluginEngine,
    path: &Path,
    bytes: Vec<u8>,
) -> Result<Component, Error> {
    let eng = engine.engine.clone();
    let p = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        Component::new(&eng, &bytes).map_err(|e| Error::NotWasm {
            path: p,
            reason: crate::plugin::plugin_text(&format!("{e:#}")),
        })
    })
    .await
    .map_err(|source| EngineError::Task {
        what: "compile task",
        source,
    })?
}

/// Why [`serve`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The input does not compile.
    #[error("{0}")]
    NotCompilable(String),
    /// Reading, writing or building the engine failed.
    #[error("{0}")]
    Failed(String),
}

impl ServeError {
    /// The exit status the worker ends with.
    pub fn exit_code(&self) -> i32 {
        match self {
            ServeError::NotCompilable(_) => EXIT_NOT_COMPILABLE,
            ServeError::Failed(_) => 1,
        }
    }
}

/// The worker's side: read component bytes from `input` (at most
/// `MAX_COMPONENT_BYTES`, 128 MiB), compile them with an engine configured like the host's, and
/// write the serialized component to `output`.
pub fn serve(input: impl Read, mut output: impl Write) -> Result<(), ServeError> {
    let mut wasm = Vec::new();
    input
        .take(MAX_COMPONENT_BYTES + 1)
        .read_to_end(&mut wasm)
        .map_err(|e| ServeError::Failed(format!("reading the component: {e}")))?;
    if wasm.len() as u64 > MAX_COMPONENT_BYTES {
        return Err(ServeError::Failed(format!(
            "the component is over {MAX_COMPONENT_BYTES} bytes"
        )));
    }
    let engine = wasmtime::Engine::new(&crate::engine::config())
        .map_err(|e| ServeError::Failed(format!("building the engine: {e:#}")))?;
    let component =
        Component::new(&engine, &wasm).map_err(|e| ServeError::NotCompilable(format!("{e:#}")))?;
    let bytes = component
        .serialize()
        .map_err(|e| ServeError::Failed(format!("serializing: {e:#}")))?;
    output
        .write_all(&bytes)
        .and_then(|()| output.flush())
        .map_err(|e| ServeError::Failed(format!("writing the compiled component: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const WAT: &str = r#"(component (core module (func (export "f"))))"#;

    #[test]
    fn serve_writes_an_artifact_the_host_engine_loads() {
        let wasm = wat::parse_str(WAT).unwrap();
        let mut out = Vec::new();
        serve(&wasm[..], &mut out).unwrap();
        let engine = PluginEngine::new().unwrap();
        let mut artifact = ArtifactWriter::new(None);
        artifact.write_all(&out).unwrap();
        assert!(artifact.finish(Origin::CompileWorker).load(&engine).is_ok());
    }

    #[test]
    fn serve_reports_wasm_that_does_not_compile_as_such() {
        // A component header with a truncated body.
        let mut wasm = wat::parse_str(WAT).unwrap();
        wasm.truncate(wasm.len() - 3);
        let err = serve(&wasm[..], Vec::new()).unwrap_err();
        assert_eq!(err.exit_code(), EXIT_NOT_COMPILABLE, "{err}");
    }

    /// A worker that cannot be started is tried again with backoff, then the plugin is
    /// refused naming the worker: never compiled in the host's own process. The clock is
    /// paused: the backoff takes no real time and the waits are exact.
    #[tokio::test(start_paused = true)]
    async fn a_worker_that_cannot_start_is_retried_then_the_plugin_refused() {
        let engine = PluginEngine::new().unwrap();
        let compiler = Compiler::Worker(Worker::new(
            "/nonexistent/kubewasm-worker",
            Vec::<String>::new(),
        ));
        let wasm = wat::parse_str(WAT).unwrap();
        let started = tokio::time::Instant::now();
        let err = compiler
            .compile(&engine, Path::new("x.wasm"), wasm, None)
            .await
            .map(|(_, source, _)| source)
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("compile worker for x.wasm: /nonexistent/kubewasm-worker could not be started (4 tries)"),
            "{text}"
        );
        assert!(
            text.contains("not compiled in the host's own process"),
            "{text}"
        );
        // 100 + 200 + 400 ms between the four tries.
        assert_eq!(started.elapsed(), Duration::from_millis(700));
    }

    /// The worker inherits no descriptor of the host's beyond its pipes: one left open
    /// without close-on-exec in the host (as a library might) is not in the worker's
    /// `/proc/self/fd`.
    #[tokio::test]
    async fn the_worker_inherits_no_descriptor_beyond_its_pipes() {
        let file = tempfile::tempfile().unwrap();
        use std::os::fd::AsRawFd;
        #[allow(unsafe_code)]
        // SAFETY: duplicating a descriptor we own; the copy is closed below.
        let leaked = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_DUPFD, 100) };
        assert!(leaked >= 100);
        let worker = Worker::new("/bin/sh", ["-c", "ls /proc/self/fd"]);
        let list = |limited: bool| {
            let mut command = tokio::process::Command::new(&worker.program);
            if limited {
                worker.limit(&mut command);
            }
            command.args(&worker.args).stdin(Stdio::null()).output()
        };
        let fds = |out: std::process::Output| -> Vec<String> {
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout)
                .unwrap()
                .split_whitespace()
                .map(str::to_string)
                .collect()
        };
        let leaked_name = leaked.to_string();
        // Without the worker's limits the leaked descriptor is inherited: the test can fail.
        assert!(fds(list(false).await.unwrap()).contains(&leaked_name));
        let open = fds(list(true).await.unwrap());
        #[allow(unsafe_code)]
        // SAFETY: closing the copy made above, once.
        unsafe {
            libc::close(leaked)
        };
        // 0-2, and the descriptor `ls` opens to read the directory.
        assert!(!open.contains(&leaked_name), "{open:?}");
        assert!(open.len() <= 4, "{open:?}");
    }

    /// A stand-in worker: a shell script speaking the protocol.
    fn sh(script: &str) -> Compiler {
        Compiler::Worker(Worker::new("/bin/sh", ["-c", script]))
    }

    async fn compile_with(compiler: &Compiler, dir: &Path) -> Result<Source, Error> {
        let engine = PluginEngine::new().unwrap();
        let wasm = wat::parse_str(WAT).unwrap();
        compiler
            .compile(&engine, Path::new("p.wasm"), wasm, Some(dir))
            .await
            .map(|(_, source, _)| source)
    }

    #[tokio::test]
    async fn a_workers_output_streams_into_an_unnamed_file_and_loads() {
        let engine = PluginEngine::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let artifact = dir.path().join("artifact");
        let mut bytes = Vec::new();
        serve(&wat::parse_str(WAT).unwrap()[..], &mut bytes).unwrap();
        std::fs::write(&artifact, &bytes).unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let worker = sh(&format!("cat >/dev/null; cat '{}'", artifact.display()));
        let wasm = wat::parse_str(WAT).unwrap();
        let (_, source, kept) = worker
            .compile(&engine, Path::new("p.wasm"), wasm, Some(&out))
            .await
            .unwrap();
        assert_eq!(source, Source::CompiledInWorker);
        let mut back = Vec::new();
        kept.unwrap().reader().read_to_end(&mut back).unwrap();
        assert_eq!(back, bytes);
        // The file has no name.
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
    }

    /// A worker that never finishes (a component crafted to compile slowly) is stopped at
    /// the timeout. The clock is paused: tokio advances it once everything waits, so the
    /// test takes no real time and cannot race.
    #[tokio::test(start_paused = true)]
    async fn a_compile_that_outlasts_the_timeout_is_stopped_and_refused() {
        let dir = tempfile::tempdir().unwrap();
        // Both the shell and the `sleep` it becomes carry a mark no other process has:
        // the shell names the temporary directory, the sleep a duration made of our pid.
        // The shell forks nothing (no `cat` to drain stdin): a forked child that has not
        // exec'd yet carries the shell's command line, and would outlive the kill of its
        // parent on a loaded machine. The host's write to a worker that never reads is
        // cut by the same timeout.
        let mark = dir.path().display().to_string();
        let duration = format!("99999.{}", std::process::id());
        let script = format!(": '{mark}'; exec sleep {duration}");
        let worker = Compiler::Worker(
            Worker::new("/bin/sh", ["-c", script.as_str()]).with_timeout(Duration::from_secs(30)),
        );
        let started = tokio::time::Instant::now();
        let err = compile_with(&worker, dir.path()).await.unwrap_err();
        assert!(
            matches!(&err, Error::CompileTimeout { limit, .. } if *limit == Duration::from_secs(30)),
            "{err}"
        );
        assert!(
            err.to_string().contains("refused until it changes"),
            "{err}"
        );
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_secs(30) && waited < Duration::from_secs(31),
            "{waited:?}"
        );
        // The worker is gone (killed), not left compiling.
        let left: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.contains(&mark) || c.contains(&duration))
            .collect();
        assert!(left.is_empty(), "worker still running: {left:?}");
    }

    /// The worker process runs under its limits: the address space and CPU time set by
    /// `setrlimit`, and the OOM killer's first choice. Read by the worker itself from
    /// /proc, as a stand-in worker that prints them.
    #[tokio::test]
    async fn the_worker_runs_under_its_rlimits_and_first_for_the_oom_killer() {
        let worker = Worker::new(
            "/bin/sh",
            ["-c", "cat /proc/self/limits /proc/self/oom_score_adj"],
        )
        .with_timeout(std::time::Duration::from_secs(7))
        .with_address_space(512 << 20);
        let mut command = tokio::process::Command::new(&worker.program);
        worker.limit(&mut command);
        let out = command.args(&worker.args).output().await.unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let row = |name: &str| -> Vec<String> {
            let line = text
                .lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("no {name} in {text}"));
            line[name.len()..]
                .split_whitespace()
                .map(str::to_string)
                .collect()
        };
        let bytes = (512u64 << 20).to_string();
        assert_eq!(row("Max address space")[..2], [bytes.clone(), bytes]);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        let cpu = row("Max cpu time");
        assert_eq!(
            cpu[..2],
            [(7 * cpus).to_string(), (7 * cpus + 1).to_string()]
        );
        assert_eq!(text.lines().last(), Some("1000"), "{text}");
    }

    #[tokio::test]
    async fn worker_failures_are_classified_and_never_hang() {
        let dir = tempfile::tempdir().unwrap();
        // The wasm does not compile: the worker's message, as the plugin's reason.
        let err = compile_with(
            &sh("cat >/dev/null; echo 'bad section' >&2; exit 2"),
            dir.path(),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&err, Error::NotWasm { reason, .. } if reason == "bad section"),
            "{err}"
        );
        // Killed (the kernel's OOM killer): said so.
        let err = compile_with(&sh("kill -9 $$"), dir.path())
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("signal 9 (killed: out of memory?)"),
            "{err}"
        );
        // A worker that floods stderr and never reads stdin still ends, its message cut.
        let err = compile_with(
            &sh("head -c 1000000 /dev/zero | tr '\\0' x >&2; exit 3"),
            dir.path(),
        )
        .await
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("exit status 3"), "{text}");
        assert!(
            text.len() < (MAX_WORKER_STDERR as usize) + 200,
            "{}",
            text.len()
        );
        // Exit 0 with garbage: refused by wasmtime, not run.
        let err = compile_with(&sh("cat >/dev/null; echo garbage"), dir.path())
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("loading the compile worker's output"),
            "{err}"
        );
    }
}
