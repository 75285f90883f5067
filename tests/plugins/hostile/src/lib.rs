//! hostile: a plugin that attacks the host, for the sandbox tests (`tests/sandbox.rs`).
//!
//! Settings (`NAME.yaml`): `name` (manifest name, default `hostile`, so several copies can
//! run side by side), `attack` (the attack when the trigger does not name one), `namespace`
//! (the only namespace its grant covers, default `default`), `describe` (`loop`, `trap` or
//! `memory`: attack already in `describe`; `watchNamespace` (the watch's namespace, default
//! all), `grantKinds`, `grantNamespaces` and `grantVerbs` (the one grant's core-group kinds,
//! namespaces and verbs, default `[ConfigMap]`, `[namespace]`, `[create]`), `readKinds`
//! (extra `apiVersion/Kind`s it reads, default none), `allowForce` (the grant allows
//! force, default false); `alias`: a manifest of `aliasCount` watches,
//! default 100, whose label selectors all point at one buffer of `aliasBytes`, default
//! 8 MiB; `many`: a manifest of `manyCount` watches, default 100,000, each its own small
//! allocation, so the host lifts and frees it cleanly and only its count is on trial).
//!
//! It watches ConfigMaps labelled `kubewasm.dev/hostile=<name>` and is granted `create` of
//! ConfigMaps in its namespace, nothing else. The triggering ConfigMap's `data.attack`
//! picks what `handle` does:
//!
//! | attack | what it does |
//! | --- | --- |
//! | `loop` | spins forever |
//! | `memory` | allocates and touches 1 MiB chunks until an allocation fails |
//! | `huge-intent` | one create intent of 5 MiB of JSON |
//! | `many-intents` | 10,000 small create intents |
//! | `trap` | panics (an `unreachable` trap with `panic = "abort"`) |
//! | `unreachable` | executes `unreachable` directly |
//! | `stack` | unbounded recursion |
//! | `outside-grant` | a granted write, then a Secret (kind not granted) |
//! | `outside-namespace` | a granted write, then a ConfigMap in `kube-system` |
//! | `escalate` | a granted write, then a ClusterRoleBinding to `cluster-admin` |
//! | `outside-verb` | a granted write, then a delete and a patch of a ConfigMap |
//! | `read-undeclared` | `host.get`/`host.list` of Secrets and ClusterRoles; reports the errors |
//! | `read-wide` | `host.list` of every ConfigMap in every namespace; reports what it saw |
//! | `file` | opens `data.path` (default `/etc/passwd`), lists `/` and `.`, creates a file |
//! | `socket` | TCP connect to `127.0.0.1:1` and `data.addr`, TCP/UDP bind, a DNS lookup |
//! | `env` | reads environment variables, arguments, `data.var` and the working directory |
//! | `log-flood` | 10,000 log lines |
//! | `huge-ref` | a delete intent whose kind and uid are 5 MiB each (outside the JSON size limit) |
//! | `log-huge` | `data.lines` (default 10) log lines of `data.bytes` (default 1 MiB) each |
//! | `owner-bogus` | a patch (`data.strategy`: `merge`, default, or `apply`) giving ConfigMap `data.victim` (default `victim`) an owner with a bogus uid, so the garbage collector would delete it |
//! | `owner-cross-ns` | a create of ConfigMap `<trigger>-child` in `data.targetNamespace` (default `other`) owned by the trigger (in its own namespace) |
//! | `finalizer` | a create of `<trigger>-out` carrying finalizer `data.finalizer` (default `example.com/block`) |
//! | `bad-name` | a merge patch of ConfigMap `data.target` (status subresource when `data.status` is `true`) |
//! | `status-spec` | a status patch of `data.kind` (default `Service`) `data.victim` (default `victim`) that also sets a label and `spec` |
//! | `error-text` | a handle-error whose message is `data.text` repeated `data.times` (default 1) times |
//! | `read-secrets` | `host.list` of Secrets in all namespaces and in its own, `host.get` of Secret `victim` in `other`; reports what it got |
//! | `alias` | `data.count` (default 100) create intents whose objects all point at one buffer of `data.bytes` (default 8 MiB) |
//! | `alias-error` | a handle-error whose message is `data.bytes` (default 8 MiB) long |
//! | `alias-log` | `data.count` (default 100) log lines, all the same buffer of `data.bytes` (default 8 MiB) |
//! | `alias-get` | `data.times` (default 4) `host.get` calls whose four arguments are all one string of `data.bytes` (default 32 MiB); reports the errors |
//! | `alias-list` | the same with `host.list` (namespace and label selector included) |
//! | `work` | spins `data.iterations` (default 50,000,000) times, then returns normally |
//! | `fat` | allocates and touches `data.mib` MiB (default 20), sleeps `data.sleepMs` (default 0) through WASI, returns normally; the memory stays with the instance |
//! | `fat` with `data.release` | as `fat`, then, holding the memory, polls `host.get` (sleeping 20 ms between polls) until ConfigMap `data.release` exists in its namespace |
//! | `owner-trigger` | a patch (`data.strategy`: `merge`, default, or `apply`) making the trigger (with its real uid) an owner of ConfigMap `data.victim` (default `victim`): deleting the trigger would then delete the victim |
//! | `owner-create` | a create (`owned-by-trigger`) of ConfigMap `data.victim` (default `victim`): a server-side apply, so on an existing victim it would add the trigger as its owner |
//! | `merge-raw` | a merge patch of ConfigMap `data.victim` (default `victim`) whose body is `data.body` (JSON) |
//! | `leak-secret` | reads Secret `data.secret` (default `victim`) in its namespace and fails permanently with its `data.password` in the message |
//! | `partial` | creates `<trigger>-first`, merge-patches ConfigMap `data.missing` (default `missing`, absent: 404), creates `<trigger>-third` |
//! | `count` | returns normally |
//! | `clock` | reads the wall clock, sleeps `data.sleepMs` (default 5) on the monotonic clock through WASI, seeds two hashers from WASI random; reports `wallSecs`, `sleptAtLeastAsked`, `randomSeeds` |
//!
//! `work`, `fat` and `count` report `instanceCalls`: the calls this instance has handled
//! (1 on a fresh instance), so a test can see instance reuse and recycling in the cluster.
//!
//! Attacks that return (reads, files, sockets, environment) report what happened in the
//! ConfigMap `<trigger>-out`, which the grant allows, so a test can assert that the
//! capability was absent.

use std::fmt::Display;
use std::hint::black_box;

use serde_json::{Map, Value, json};

wit_bindgen::generate!({
    path: "../../../wit",
    world: "kubewasm:plugin/plugin",
});

use exports::kubewasm::plugin::handler::Guest;
use kubewasm::plugin::host;
use kubewasm::plugin::types::{
    CreateIntent, DeleteIntent, Event, EventType, Grant, HandleError, Intent, LogLevel, Manifest,
    ObjectRef, PatchIntent, PatchStrategy, Read, ResourceRef, TypeRef, Verb, Watch,
};

struct Hostile;

/// Calls this instance has handled (instance state: survives between pooled calls).
static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn settings(s: &Option<String>) -> Value {
    s.as_deref()
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or(Value::Null)
}

fn text<'a>(s: &'a Value, key: &str, default: &'a str) -> &'a str {
    s.get(key).and_then(Value::as_str).unwrap_or(default)
}

fn create(object: Value) -> Intent {
    Intent::Create(CreateIntent {
        object: object.to_string(),
        force: false,
        owned_by_trigger: false,
    })
}

fn outcome<T, E: Display>(r: Result<T, E>, ok: impl FnOnce(T) -> String) -> String {
    match r {
        Ok(v) => format!("ok: {}", ok(v)),
        Err(e) => format!("err: {e}"),
    }
}

/// Spin until the host interrupts the call.
fn spin() -> ! {
    let mut n: u64 = 0;
    loop {
        n = black_box(n.wrapping_add(1));
    }
}

/// Allocate and touch memory until the host refuses to grow it.
fn hoard() -> usize {
    const CHUNK: usize = 1 << 20;
    let mut held: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut chunk: Vec<u8> = Vec::new();
        if chunk.try_reserve_exact(CHUNK).is_err() {
            // Only reached if the allocator reports failure instead of trapping.
            return held.len();
        }
        chunk.resize(CHUNK, 0);
        for i in (0..CHUNK).step_by(4096) {
            chunk[i] = (i >> 12) as u8 | 1;
        }
        held.push(black_box(chunk));
        if held.len().is_multiple_of(16) {
            host::log(LogLevel::Info, &format!("holding {} MiB", held.len()));
        }
    }
}

fn recurse(depth: u64) -> u64 {
    let buf = black_box([depth; 64]);
    if black_box(depth) == u64::MAX {
        return 0;
    }
    black_box(recurse(depth + 1)).wrapping_add(buf[depth as usize % 64])
}

/// `count` strings that all point at one buffer of `bytes` bytes (`prefix` + `x` padding +
/// `suffix`): canonical-ABI strings are pointer + length, so the guest pays for the buffer
/// once and a host that copies each string pays `count` times. The buffer is leaked and
/// the strings are never dropped by this code (the host is expected to refuse the result;
/// were it accepted, post-return would free the buffer `count` times, this plugin's
/// problem only).
fn aliased(bytes: usize, count: usize, prefix: &str, suffix: &str) -> Vec<String> {
    let mut buf = String::with_capacity(bytes.max(prefix.len() + suffix.len()));
    buf.push_str(prefix);
    while buf.len() + suffix.len() < bytes {
        buf.push('x');
    }
    buf.push_str(suffix);
    let buf = std::mem::ManuallyDrop::new(buf);
    (0..count)
        .map(|_| {
            // SAFETY (of the guest, deliberately violated for the attack): the strings
            // share one allocation; see above.
            #[allow(unsafe_code)]
            unsafe {
                String::from_raw_parts(buf.as_ptr() as *mut u8, buf.len(), buf.capacity())
            }
        })
        .collect()
}

fn number_of(v: Option<&Value>, default: usize) -> usize {
    v.and_then(|v| {
        v.as_str()
            .and_then(|t| t.parse().ok())
            .or(v.as_u64().map(|n| n as usize))
    })
    .unwrap_or(default)
}

/// A list of strings from the settings, or `default`.
fn strings(s: &Value, key: &str, default: &[&str]) -> Vec<String> {
    match s.get(key).and_then(Value::as_array) {
        Some(list) => list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        None => default.iter().map(|d| d.to_string()).collect(),
    }
}

fn describe_attack(s: &Value) {
    match text(s, "describe", "") {
        "loop" => spin(),
        "trap" => panic!("hostile describe was asked to trap"),
        "memory" => {
            hoard();
        }
        _ => {}
    }
}

impl Guest for Hostile {
    fn describe(settings_json: Option<String>) -> Result<Manifest, String> {
        let s = settings(&settings_json);
        describe_attack(&s);
        let name = text(&s, "name", "hostile").to_string();
        let attack = text(&s, "describe", "");
        if attack == "alias" || attack == "many" {
            let selectors = if attack == "alias" {
                aliased(
                    number_of(s.get("aliasBytes"), 8 << 20),
                    number_of(s.get("aliasCount"), 100),
                    "a in (",
                    ")",
                )
            } else {
                // Distinct strings: were they aliased, post-return would free one buffer
                // once per watch and trap before the host could judge the count.
                (0..number_of(s.get("manyCount"), 100_000))
                    .map(|i| format!("a in (x{i})"))
                    .collect()
            };
            return Ok(Manifest {
                watches: selectors
                    .into_iter()
                    .enumerate()
                    .map(|(i, selector)| Watch {
                        id: format!("w{i}"),
                        resource: ResourceRef::Kind(TypeRef {
                            api_version: "v1".into(),
                            kind: "ConfigMap".into(),
                        }),
                        namespace: None,
                        label_selector: Some(selector),
                        field_selector: None,
                        fields: vec![],
                    })
                    .collect(),
                grants: vec![],
                reads: vec![],
                name,
                version: "1".into(),
            });
        }
        Ok(Manifest {
            watches: vec![Watch {
                id: "triggers".into(),
                resource: ResourceRef::Kind(TypeRef {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                }),
                namespace: s
                    .get("watchNamespace")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                label_selector: Some(format!("kubewasm.dev/hostile={name}")),
                field_selector: None,
                fields: vec![],
            }],
            grants: vec![Grant {
                api_groups: vec!["".into()],
                kinds: strings(&s, "grantKinds", &["ConfigMap"]),
                namespaces: strings(&s, "grantNamespaces", &[text(&s, "namespace", "default")]),
                verbs: strings(&s, "grantVerbs", &["create"])
                    .iter()
                    .filter_map(|v| match v.as_str() {
                        "create" => Some(Verb::Create),
                        "patch" => Some(Verb::Patch),
                        "patch-status" => Some(Verb::PatchStatus),
                        "delete" => Some(Verb::Delete),
                        _ => None,
                    })
                    .collect(),
                allow_force: s.get("allowForce").and_then(Value::as_bool).unwrap_or(false),
            }],
            reads: strings(&s, "readKinds", &[])
                .iter()
                .filter_map(|k| k.rsplit_once('/'))
                .map(|(api_version, kind)| Read {
                    resource: ResourceRef::Kind(TypeRef {
                        api_version: api_version.into(),
                        kind: kind.into(),
                    }),
                    fields: vec![],
                })
                .collect(),
            name,
            version: "1".into(),
        })
    }

    fn handle(event: Event, settings_json: Option<String>) -> Result<Vec<Intent>, HandleError> {
        let s = settings(&settings_json);
        let obj: Value = serde_json::from_str(&event.object).map_err(|e| HandleError {
            message: e.to_string(),
            retry: false,
        })?;
        if event.event_type == EventType::Deleted {
            return Ok(vec![]);
        }
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        let cm = obj["metadata"]["name"]
            .as_str()
            .unwrap_or("unnamed")
            .to_string();
        let data = |key: &str| obj["data"][key].as_str().map(str::to_string);
        let attack = data("attack").unwrap_or_else(|| text(&s, "attack", "none").to_string());
        host::log(LogLevel::Info, &format!("attack {attack} from {ns}/{cm}"));
        let calls = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let number = |key: &str, default: u64| {
            data(key)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(default)
        };

        let out_name = format!("{cm}-out");
        let out = |report: Map<String, Value>| {
            create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": out_name, "namespace": ns},
                          "data": report}))
        };
        let granted = || out(Map::from_iter([("partial".to_string(), json!("yes"))]));
        let report = |pairs: Vec<(&str, String)>| {
            out(pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), Value::String(v)))
                .collect())
        };

        Ok(match attack.as_str() {
            "loop" => spin(),
            "memory" => {
                let mib = hoard();
                vec![report(vec![("survivedMiB", mib.to_string())])]
            }
            "huge-intent" => vec![out(Map::from_iter([(
                "big".to_string(),
                Value::String("x".repeat(5 << 20)),
            )]))],
            "many-intents" => (0..10_000)
                .map(|i| {
                    create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": format!("{cm}-{i}"), "namespace": ns}}))
                })
                .collect(),
            "trap" => panic!("hostile was asked to trap"),
            "unreachable" => core::arch::wasm32::unreachable(),
            "stack" => {
                let depth = recurse(0);
                vec![report(vec![("depth", depth.to_string())])]
            }
            "outside-grant" => vec![
                granted(),
                create(json!({"apiVersion": "v1", "kind": "Secret",
                              "metadata": {"name": format!("{cm}-secret"), "namespace": ns},
                              "stringData": {"stolen": "yes"}})),
            ],
            "outside-namespace" => vec![
                granted(),
                create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": format!("{cm}-escape"), "namespace": "kube-system"}})),
            ],
            "escalate" => vec![
                granted(),
                create(json!({"apiVersion": "rbac.authorization.k8s.io/v1",
                              "kind": "ClusterRoleBinding",
                              "metadata": {"name": format!("{cm}-admin")},
                              "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                          "kind": "ClusterRole", "name": "cluster-admin"},
                              "subjects": [{"kind": "ServiceAccount", "name": "default",
                                            "namespace": ns}]})),
            ],
            "outside-verb" => {
                let target = |name: &str| ObjectRef {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                    namespace: Some(ns.clone()),
                    name: name.to_string(),
                };
                let victim = data("victim").unwrap_or_else(|| "victim".into());
                vec![
                    granted(),
                    Intent::Patch(PatchIntent {
                        target: target(&victim),
                        body: json!({"data": {"patched": "by-hostile"}}).to_string(),
                        strategy: PatchStrategy::Merge,
                        status: false,
                        force: false,
                    }),
                    Intent::Delete(DeleteIntent {
                        target: target(&victim),
                        uid: None,
                        resource_version: None,
                        propagation: None,
                    }),
                ]
            }
            "read-undeclared" => {
                let secret = host::get("v1", "Secret", Some(&ns), "victim");
                let secrets = host::list("v1", "Secret", None, None);
                let role = host::get(
                    "rbac.authorization.k8s.io/v1",
                    "ClusterRole",
                    None,
                    "cluster-admin",
                );
                vec![report(vec![
                    ("getSecret", outcome(secret, |o| format!("{o:?}"))),
                    ("listSecrets", outcome(secrets, |l| l.join("\n"))),
                    ("getClusterRole", outcome(role, |o| format!("{o:?}"))),
                ])]
            }
            "read-wide" => {
                let all = host::list("v1", "ConfigMap", None, None);
                let seen = outcome(all, |items| {
                    items
                        .iter()
                        .filter_map(|o| serde_json::from_str::<Value>(o).ok())
                        .map(|o| {
                            format!(
                                "{}/{}",
                                o["metadata"]["namespace"].as_str().unwrap_or(""),
                                o["metadata"]["name"].as_str().unwrap_or("")
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(",")
                });
                vec![report(vec![("seen", seen)])]
            }
            "file" => {
                let path = data("path").unwrap_or_else(|| "/etc/passwd".into());
                let names = |rd: std::fs::ReadDir| {
                    rd.filter_map(Result::ok)
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect::<Vec<_>>()
                        .join(",")
                };
                vec![report(vec![
                    (
                        "read",
                        outcome(std::fs::read_to_string(&path), |t| {
                            t.chars().take(200).collect()
                        }),
                    ),
                    ("listRoot", outcome(std::fs::read_dir("/"), names)),
                    ("listCwd", outcome(std::fs::read_dir("."), names)),
                    (
                        "createTmp",
                        outcome(std::fs::write("/tmp/kubewasm-hostile", b"x"), |()| {
                            "written".into()
                        }),
                    ),
                    (
                        "cwd",
                        outcome(std::env::current_dir(), |p| p.display().to_string()),
                    ),
                ])]
            }
            "socket" => {
                use std::net::{TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
                let connect = |addr: &str| {
                    outcome(TcpStream::connect(addr), |s| {
                        format!("connected from {:?}", s.local_addr().ok())
                    })
                };
                let addr = data("addr").unwrap_or_else(|| "127.0.0.1:1".into());
                vec![report(vec![
                    ("connectClosed", connect("127.0.0.1:1")),
                    ("connectAddr", connect(&addr)),
                    (
                        "listen",
                        outcome(TcpListener::bind("127.0.0.1:0"), |l| {
                            format!("listening on {:?}", l.local_addr().ok())
                        }),
                    ),
                    (
                        "udp",
                        outcome(
                            UdpSocket::bind("127.0.0.1:0")
                                .and_then(|u| u.send_to(b"hello", "127.0.0.1:9")),
                            |n| format!("sent {n} bytes"),
                        ),
                    ),
                    (
                        "lookup",
                        outcome(("localhost", 80).to_socket_addrs(), |a| {
                            format!("{:?}", a.collect::<Vec<_>>())
                        }),
                    ),
                ])]
            }
            "socket-flood" => {
                // Try to hold thousands of OS sockets (to exhaust the host's descriptors):
                // every socket that opens is kept until the call returns.
                use std::net::{TcpListener, UdpSocket};
                let mut held = (Vec::new(), Vec::new());
                let mut first_error = String::new();
                for _ in 0..5000 {
                    match TcpListener::bind("127.0.0.1:0") {
                        Ok(l) => held.0.push(l),
                        Err(e) if first_error.is_empty() => first_error = e.to_string(),
                        Err(_) => {}
                    }
                    if let Ok(u) = UdpSocket::bind("127.0.0.1:0") {
                        held.1.push(u);
                    }
                }
                vec![report(vec![
                    ("tcpOpened", held.0.len().to_string()),
                    ("udpOpened", held.1.len().to_string()),
                    ("firstError", first_error),
                ])]
            }
            "env" => {
                let var = data("var").unwrap_or_else(|| "HOME".into());
                let vars: Vec<String> = std::env::vars_os()
                    .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
                    .collect();
                let args: Vec<String> = std::env::args_os()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect();
                vec![report(vec![
                    ("vars", vars.join("\n")),
                    ("varCount", vars.len().to_string()),
                    ("args", args.join(" ")),
                    ("argCount", args.len().to_string()),
                    ("var", outcome(std::env::var(&var), |v| v)),
                    (
                        "cwd",
                        outcome(std::env::current_dir(), |p| p.display().to_string()),
                    ),
                ])]
            }
            "log-flood" => {
                for i in 0..10_000 {
                    host::log(LogLevel::Info, &format!("flood line {i}"));
                }
                vec![granted()]
            }
            "error-text" => {
                let text = data("text").unwrap_or_default();
                let times = data("times").and_then(|t| t.parse().ok()).unwrap_or(1);
                return Err(HandleError {
                    message: text.repeat(times),
                    retry: false,
                });
            }
            "owner-bogus" => {
                let victim = data("victim").unwrap_or_else(|| "victim".into());
                let strategy = match data("strategy").as_deref() {
                    Some("apply") => PatchStrategy::Apply,
                    _ => PatchStrategy::Merge,
                };
                vec![Intent::Patch(PatchIntent {
                    target: ObjectRef {
                        api_version: "v1".into(),
                        kind: "ConfigMap".into(),
                        namespace: Some(ns.clone()),
                        name: victim,
                    },
                    body: json!({"metadata": {"ownerReferences": [{
                        "apiVersion": "v1", "kind": "ConfigMap", "name": "ghost",
                        "uid": "6f1e0000-0000-4000-8000-00000000dead"}]}})
                    .to_string(),
                    strategy,
                    status: false,
                    force: false,
                })]
            }
            "owner-cross-ns" => {
                let target_ns = data("targetNamespace").unwrap_or_else(|| "other".into());
                vec![create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("{cm}-child"), "namespace": target_ns,
                        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                            "name": cm, "uid": obj["metadata"]["uid"]}]}}))]
            }
            "finalizer" => {
                let finalizer = data("finalizer").unwrap_or_else(|| "example.com/block".into());
                vec![create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": out_name, "namespace": ns,
                                 "finalizers": [finalizer]}}))]
            }
            "bad-name" => {
                let status = data("status").as_deref() == Some("true");
                let body = if status {
                    json!({"status": {"pwned": "yes"}})
                } else {
                    json!({"data": {"pwned": "yes"}})
                };
                vec![Intent::Patch(PatchIntent {
                    target: ObjectRef {
                        api_version: "v1".into(),
                        kind: "ConfigMap".into(),
                        namespace: Some(ns.clone()),
                        name: data("target").unwrap_or_default(),
                    },
                    body: body.to_string(),
                    strategy: PatchStrategy::Merge,
                    status,
                    force: false,
                })]
            }
            "status-spec" => vec![Intent::Patch(PatchIntent {
                target: ObjectRef {
                    api_version: "v1".into(),
                    kind: data("kind").unwrap_or_else(|| "Service".into()),
                    namespace: Some(ns.clone()),
                    name: data("victim").unwrap_or_else(|| "victim".into()),
                },
                body: json!({"metadata": {"labels": {"pwned": "yes"}},
                             "spec": {"type": "NodePort"},
                             "status": {"loadBalancer": {}}})
                .to_string(),
                strategy: PatchStrategy::Apply,
                status: true,
                force: false,
            })],
            "read-secrets" => {
                let names = |items: Vec<String>| {
                    items
                        .iter()
                        .filter_map(|o| serde_json::from_str::<Value>(o).ok())
                        .map(|o| {
                            format!(
                                "{}/{}",
                                o["metadata"]["namespace"].as_str().unwrap_or(""),
                                o["metadata"]["name"].as_str().unwrap_or("")
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(",")
                };
                vec![report(vec![
                    (
                        "listAll",
                        outcome(host::list("v1", "Secret", None, None), names),
                    ),
                    (
                        "listOwn",
                        outcome(host::list("v1", "Secret", Some(&ns), None), names),
                    ),
                    (
                        "getOther",
                        outcome(host::get("v1", "Secret", Some("other"), "victim"), |o| {
                            format!("{}", o.is_some())
                        }),
                    ),
                ])]
            }
            "huge-ref" => vec![Intent::Delete(DeleteIntent {
                target: ObjectRef {
                    api_version: "v1".into(),
                    kind: "K".repeat(5 << 20),
                    namespace: Some(ns.clone()),
                    name: "victim".into(),
                },
                uid: Some("u".repeat(5 << 20)),
                resource_version: None,
                propagation: None,
            })],
            "work" => {
                let mut n: u64 = 0;
                for _ in 0..number("iterations", 50_000_000) {
                    n = black_box(n.wrapping_add(1));
                }
                vec![report(vec![
                    ("iterations", n.to_string()),
                    ("instanceCalls", calls.to_string()),
                ])]
            }
            "fat" => {
                let mib = number("mib", 20) as usize;
                let mut fat = vec![0u8; mib << 20];
                for i in (0..fat.len()).step_by(4096) {
                    fat[i] = 1;
                }
                black_box(&fat);
                drop(fat);
                // A barrier from cluster state: hold the touched memory (linear memory
                // never shrinks) until ConfigMap `data.release` exists, so a test can have
                // several such calls in flight at once without guessing at timing.
                if let Some(release) = data("release") {
                    host::log(
                        LogLevel::Info,
                        &format!("fat holding {mib} MiB until {release} exists"),
                    );
                    loop {
                        match host::get("v1", "ConfigMap", Some(&ns), &release) {
                            Ok(Some(_)) => break,
                            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(20)),
                            Err(e) => {
                                return Err(HandleError {
                                    message: format!("waiting for {release}: {e}"),
                                    retry: false,
                                });
                            }
                        }
                    }
                }
                let pause = number("sleepMs", 0);
                if pause > 0 {
                    std::thread::sleep(std::time::Duration::from_millis(pause));
                }
                vec![report(vec![
                    ("touchedMiB", mib.to_string()),
                    ("instanceCalls", calls.to_string()),
                ])]
            }
            "count" => vec![report(vec![("instanceCalls", calls.to_string())])],
            "owner-trigger" => {
                let strategy = match data("strategy").as_deref() {
                    Some("apply") => PatchStrategy::Apply,
                    _ => PatchStrategy::Merge,
                };
                vec![Intent::Patch(PatchIntent {
                    target: ObjectRef {
                        api_version: "v1".into(),
                        kind: "ConfigMap".into(),
                        namespace: Some(ns.clone()),
                        name: data("victim").unwrap_or_else(|| "victim".into()),
                    },
                    body: json!({"metadata": {"ownerReferences": [{
                        "apiVersion": "v1", "kind": "ConfigMap", "name": cm,
                        "uid": obj["metadata"]["uid"]}]}})
                    .to_string(),
                    strategy,
                    status: false,
                    force: false,
                })]
            }
            "owner-create" => vec![Intent::Create(CreateIntent {
                object: json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": data("victim").unwrap_or_else(|| "victim".into()),
                                 "namespace": ns},
                    "data": {"by": cm}})
                .to_string(),
                force: false,
                owned_by_trigger: true,
            })],
            "merge-raw" => vec![Intent::Patch(PatchIntent {
                target: ObjectRef {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                    namespace: Some(ns.clone()),
                    name: data("victim").unwrap_or_else(|| "victim".into()),
                },
                body: data("body").unwrap_or_else(|| "{}".into()),
                strategy: PatchStrategy::Merge,
                status: false,
                force: false,
            })],
            "leak-secret" => {
                let name = data("secret").unwrap_or_else(|| "victim".into());
                let secret = host::get("v1", "Secret", Some(&ns), &name).map_err(|e| HandleError {
                    message: format!("reading {name}: {e}"),
                    retry: false,
                })?;
                let value = secret
                    .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                    .and_then(|o| o["data"]["password"].as_str().map(str::to_string))
                    .unwrap_or_default();
                return Err(HandleError {
                    message: format!("cannot go on: the password is {value}"),
                    retry: false,
                });
            }
            "partial" => vec![
                create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": format!("{cm}-first"), "namespace": ns}})),
                Intent::Patch(PatchIntent {
                    target: ObjectRef {
                        api_version: "v1".into(),
                        kind: "ConfigMap".into(),
                        namespace: Some(ns.clone()),
                        name: data("missing").unwrap_or_else(|| "missing".into()),
                    },
                    body: json!({"data": {"x": "y"}}).to_string(),
                    strategy: PatchStrategy::Merge,
                    status: false,
                    force: false,
                }),
                create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": format!("{cm}-third"), "namespace": ns}})),
            ],
            "clock" => {
                use std::hash::BuildHasher;
                let wall = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs().to_string())
                    .unwrap_or_else(|e| format!("err: {e}"));
                // A sleep is a WASI monotonic-clock subscription polled to completion.
                let asked = number("sleepMs", 5);
                let started = std::time::Instant::now();
                std::thread::sleep(std::time::Duration::from_millis(asked));
                let slept = started.elapsed();
                let state = std::collections::hash_map::RandomState::new;
                let random = state().hash_one(1u64) != state().hash_one(1u64);
                vec![report(vec![
                    ("wallSecs", wall),
                    (
                        "sleptAtLeastAsked",
                        (slept.as_millis() >= u128::from(asked)).to_string(),
                    ),
                    ("randomSeeds", random.to_string()),
                ])]
            }
            "log-huge" => {
                let line = "x".repeat(number("bytes", 1 << 20) as usize);
                for _ in 0..number("lines", 10) {
                    host::log(LogLevel::Info, &line);
                }
                vec![granted()]
            }
            "alias" => {
                let prefix = json!({"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": format!("{cm}-alias"), "namespace": ns}})
                .to_string();
                // `{...,"data":{"pad":"xxx…"}}`
                let prefix = format!("{},\"data\":{{\"pad\":\"", &prefix[..prefix.len() - 1]);
                aliased(
                    number_of(obj["data"].get("bytes"), 8 << 20),
                    number_of(obj["data"].get("count"), 100),
                    &prefix,
                    "\"}}",
                )
                .into_iter()
                .map(|object| {
                    Intent::Create(CreateIntent {
                        object,
                        force: false,
                        owned_by_trigger: false,
                    })
                })
                .collect()
            }
            "alias-error" => {
                return Err(HandleError {
                    message: "e".repeat(number_of(obj["data"].get("bytes"), 8 << 20)),
                    retry: false,
                });
            }
            "alias-get" | "alias-list" => {
                // One buffer, passed by pointer and length as every argument: the guest
                // pays for it once, a host that copies each argument four times a call.
                let big = "a".repeat(number("bytes", 32 << 20) as usize);
                let mut errors = Vec::new();
                for _ in 0..number("times", 4) {
                    let answer = if attack == "alias-get" {
                        host::get(&big, &big, Some(&big), &big).map(|_| ())
                    } else {
                        host::list(&big, &big, Some(&big), Some(&big)).map(|_| ())
                    };
                    errors.push(answer.err().unwrap_or_else(|| "ok".into()));
                }
                black_box(&big);
                let longest = errors.iter().map(String::len).max().unwrap_or(0);
                vec![report(vec![
                    ("errors", errors.join(" | ")),
                    ("longestError", longest.to_string()),
                ])]
            }
            "alias-log" => {
                let line = "l".repeat(number_of(obj["data"].get("bytes"), 8 << 20));
                for _ in 0..number_of(obj["data"].get("count"), 100) {
                    host::log(LogLevel::Info, &line);
                }
                vec![granted()]
            }
            other => {
                return Err(HandleError {
                    message: format!("unknown attack {other:?}"),
                    retry: false,
                });
            }
        })
    }
}

export!(Hostile);
