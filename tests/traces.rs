//! Traces: the real `kubewasm run` exporting over OTLP/HTTP to a receiver inside the test
//! (protobuf `ExportTraceServiceRequest`s decoded with opentelemetry-proto's types), one
//! trace per event with its spans and parent links; the trace id in the event's log lines
//! (both formats); and nothing sent anywhere without `OTEL_*`.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::Uri;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use support::*;

/// What the receiver got: each request's path and its decoded body.
type Received = Arc<Mutex<Vec<(String, ExportTraceServiceRequest)>>>;

/// An OTLP/HTTP receiver on `addr` recording every request, whatever its path.
async fn receiver(addr: &str) -> (SocketAddr, Received) {
    let got: Received = Arc::default();
    let app = Router::new()
        .fallback(
            |State(got): State<Received>, uri: Uri, body: Bytes| async move {
                let request = ExportTraceServiceRequest::decode(body).unwrap_or_default();
                got.lock()
                    .expect("receiver lock")
                    .push((uri.path().to_string(), request));
                // An empty ExportTraceServiceResponse: everything accepted.
                (
                    [("content-type", "application/x-protobuf")],
                    Vec::<u8>::new(),
                )
            },
        )
        .with_state(got.clone());
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .unwrap_or_else(|e| panic!("binding the OTLP receiver on {addr}: {e}"));
    let bound = listener.local_addr().expect("receiver address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (bound, got)
}

/// `kubewasm run` on `env`'s plugins in `format`, with no `OTEL_*` variable of this
/// process and `vars` set.
fn start_host(env: &Env, format: &str, vars: &[(&str, &str)]) -> HostProcess {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
    cmd.args(["--log-format", format, "--log", "info"])
        .arg("run")
        .arg("--plugins")
        .arg(&env.plugins)
        .arg("--approvals")
        .arg(&env.approvals)
        .arg("--kubeconfig")
        .arg(&env.kubeconfig)
        .args(["--discovery-interval", "300ms"])
        .args(["--metrics-addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("OTEL_") {
            cmd.env_remove(name);
        }
    }
    cmd.envs(vars.iter().copied());
    HostProcess::spawn_command(cmd)
}

/// The ContentSite `blog` created (as `site`) on `env`, whose host provisions it: once
/// its children and its status are written, the site's uid.
async fn provision_site(env: &Env, host: &HostProcess, site: serde_json::Value) -> String {
    let site = env.create(&env.sites(), site).await;
    let services = env.api("v1", "Service", "services", Some("default"));
    eventually("Service blog", CONVERGE, || async {
        get(&services, "blog").await
    })
    .await;
    host.wait_log("the status write", |l| {
        field(l, "message").starts_with("applied patch-status ContentSite")
            || l.to_string().contains("applied patch-status ContentSite")
    })
    .await;
    site.metadata.uid.expect("uid")
}

/// [`provision_site`] with a plain `blog`.
async fn provision(env: &Env, host: &HostProcess) -> String {
    provision_site(env, host, content_site("blog", 3)).await
}

/// A W3C traceparent another component left on the site (KEP-5915's annotation).
const WRITER_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const WRITER_SPAN: &str = "b7ad6b7169203331";

fn string_value(v: &Option<AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        other => format!("{other:?}"),
    }
}

fn attributes(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), string_value(&kv.value)))
        .collect()
}

/// Every span received, with its resource's attributes.
fn spans(got: &Received) -> Vec<(BTreeMap<String, String>, Span)> {
    let got = got.lock().expect("receiver lock");
    let mut out = Vec::new();
    for (_, request) in got.iter() {
        for rs in &request.resource_spans {
            let resource = rs
                .resource
                .as_ref()
                .map(|r| attributes(&r.attributes))
                .unwrap_or_default();
            for ss in &rs.scope_spans {
                out.extend(ss.spans.iter().map(|s| (resource.clone(), s.clone())));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_is_one_trace_of_queue_wait_call_admission_and_writes() {
    let (addr, got) = receiver("127.0.0.1:0").await;
    let env = Env::new().await;
    env.add_plugin(
        &example_plugin("contentsite-provisioner"),
        "contentsite-provisioner",
        None,
    );
    let endpoint = format!("http://{addr}");
    // Spans leave only when the batch is due; a due time past the test's end leaves the
    // shutdown's flush as the only way out.
    let host = start_host(
        &env,
        "json",
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_SERVICE_NAME", "traces-test"),
            ("OTEL_BSP_SCHEDULE_DELAY", "600000"),
        ],
    );
    let mut site = content_site("blog", 3);
    site["metadata"]["annotations"] = serde_json::json!({
        "tracing.k8s.io/traceparent": format!("00-{WRITER_TRACE}-{WRITER_SPAN}-01")
    });
    let uid = provision_site(&env, &host, site).await;
    let event_line = host
        .wait_log("the event line of blog's addition", |l| {
            field(l, "message") == "event"
                && field(l, "object") == "ContentSite default/blog"
                && field(l, "event") == "added"
        })
        .await;
    let logs = host.dump();
    assert_eq!(host.stop(), Some(0), "{logs}");

    let received = got.lock().expect("receiver lock").clone();
    assert!(!received.is_empty(), "nothing exported\n{logs}");
    assert!(
        received.iter().all(|(path, _)| path == "/v1/traces"),
        "{:?}",
        received.iter().map(|(p, _)| p).collect::<Vec<_>>()
    );
    let spans = spans(&got);
    let (resource, root) = spans
        .iter()
        .find(|(_, s)| {
            let a = attributes(&s.attributes);
            s.name == "event"
                && a.get("kubewasm.object.name").map(String::as_str) == Some("blog")
                && a.get("kubewasm.event").map(String::as_str) == Some("added")
        })
        .unwrap_or_else(|| panic!("no root span of blog's addition in {spans:#?}"));
    assert_eq!(resource["service.name"], "traces-test");
    assert!(root.parent_span_id.is_empty(), "the root has a parent");
    let a = attributes(&root.attributes);
    let expect = [
        ("kubewasm.plugin", "contentsite-provisioner"),
        ("kubewasm.plugin.version", field(&event_line, "version")),
        ("kubewasm.watch", field(&event_line, "watch")),
        ("kubewasm.object.api_version", "sites.kubewasm.dev/v1alpha1"),
        ("kubewasm.object.kind", "ContentSite"),
        ("kubewasm.object.namespace", "default"),
        ("kubewasm.object.name", "blog"),
        ("kubewasm.object.uid", uid.as_str()),
    ];
    for (key, value) in expect {
        assert_eq!(
            a.get(key).map(String::as_str),
            Some(value),
            "{key} in {a:?}"
        );
    }
    // The writer's context is linked, not the parent: the event is a trace of its own.
    let links: Vec<(String, String)> = root
        .links
        .iter()
        .map(|l| (hex::encode(&l.trace_id), hex::encode(&l.span_id)))
        .collect();
    assert_eq!(links, [(WRITER_TRACE.to_string(), WRITER_SPAN.to_string())]);
    assert_ne!(hex::encode(&root.trace_id), WRITER_TRACE);

    // Every other span of the trace is a child of the root, inside its time.
    let trace: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.trace_id == root.trace_id && s.span_id != root.span_id)
        .collect();
    for s in &trace {
        assert_eq!(
            s.parent_span_id, root.span_id,
            "{} is not the root's child",
            s.name
        );
        assert!(
            s.start_time_unix_nano >= root.start_time_unix_nano
                && s.end_time_unix_nano <= root.end_time_unix_nano,
            "{} outside the root's time",
            s.name
        );
    }
    let mut names: Vec<&str> = trace.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "admission",
            "call",
            "create MongoDB",
            "create Service",
            "patch-status ContentSite",
            "queue wait",
        ]
    );
    let write = |name: &str| {
        let s = trace.iter().find(|s| s.name == name).expect("write span");
        attributes(&s.attributes)
    };
    let mongo = write("create MongoDB");
    assert_eq!(mongo["kubewasm.write.verb"], "create");
    assert_eq!(mongo["kubewasm.write.api_version"], "mongodb.com/v1");
    assert_eq!(mongo["kubewasm.write.kind"], "MongoDB");
    assert_eq!(mongo["kubewasm.write.namespace"], "default");
    assert_eq!(mongo["kubewasm.write.name"], "blog-db");
    assert_eq!(mongo["kubewasm.write.outcome"], "applied");
    let status = write("patch-status ContentSite");
    assert_eq!(status["kubewasm.write.verb"], "patch-status");
    assert_eq!(status["kubewasm.write.outcome"], "applied");
    let call = write("call");
    assert_eq!(call["kubewasm.intents"], "3");

    // The event's log lines carry the trace id: the `event` line, and the lines logged
    // inside its span (the writes).
    let trace_id = hex::encode(&root.trace_id);
    assert_eq!(field(&event_line, "trace_id"), trace_id, "{event_line}");
    let applied = logs
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| field(l, "message").starts_with("applied create MongoDB default/blog-db"))
        .expect("the MongoDB's applied line");
    assert_eq!(applied["span"]["trace_id"], trace_id.as_str(), "{applied}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_log_lines_carry_the_trace_id() {
    let (addr, got) = receiver("127.0.0.1:0").await;
    let env = Env::new().await;
    env.add_plugin(
        &example_plugin("contentsite-provisioner"),
        "contentsite-provisioner",
        None,
    );
    let endpoint = format!("http://{addr}/v1/traces");
    let host = start_host(
        &env,
        "text",
        &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint.as_str())],
    );
    provision(&env, &host).await;
    let logs = host.dump();
    // The text lines as written (the harness keeps each as a `raw` message).
    let lines: Vec<String> = host
        .logs()
        .iter()
        .map(|l| field(l, "message").to_string())
        .collect();
    assert_eq!(host.stop(), Some(0), "{logs}");
    let spans = spans(&got);
    let root = spans
        .iter()
        .map(|(_, s)| s)
        .find(|s| {
            let a = attributes(&s.attributes);
            s.name == "event"
                && a.get("kubewasm.object.name").map(String::as_str) == Some("blog")
                && a.get("kubewasm.event").map(String::as_str) == Some("added")
        })
        .unwrap_or_else(|| panic!("no root span for blog in {spans:#?}\n{logs}"));
    let trace_id = format!("trace_id=\"{}\"", hex::encode(&root.trace_id));
    let event = lines
        .iter()
        .find(|l| {
            l.contains("event: event ")
                && l.contains("object=ContentSite default/blog")
                && l.contains("event=\"added\"")
        })
        .unwrap_or_else(|| panic!("no event line for blog\n{logs}"));
    assert_eq!(event.matches(&trace_id).count(), 1, "{event}");
    let applied = lines
        .iter()
        .find(|l| l.contains("applied create MongoDB default/blog-db") && l.contains(&trace_id))
        .unwrap_or_else(|| panic!("no applied line of the event carrying {trace_id}\n{logs}"));
    assert!(applied.contains(" INFO event: applied "), "{applied}");
}

/// Without `OTEL_*`, nothing goes out: not even to the OTLP/HTTP default endpoint
/// (localhost:4318), where this receiver listens. A host exporting by default would send
/// its spans there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_otel_variables_nothing_is_exported() {
    let (_, got) = receiver("127.0.0.1:4318").await;
    let env = Env::new().await;
    env.add_plugin(
        &example_plugin("contentsite-provisioner"),
        "contentsite-provisioner",
        None,
    );
    let host = start_host(&env, "json", &[]);
    provision(&env, &host).await;
    let event_line = host
        .wait_log("the event line of blog's addition", |l| {
            field(l, "message") == "event" && field(l, "object") == "ContentSite default/blog"
        })
        .await;
    let logs = host.dump();
    assert_eq!(host.stop(), Some(0), "{logs}");
    let received = got.lock().expect("receiver lock").len();
    assert_eq!(
        received, 0,
        "{received} export request(s) without OTEL_*\n{logs}"
    );
    assert!(event_line.get("trace_id").is_none(), "{event_line}");
}
