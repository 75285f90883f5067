//! `kubewasm preview report PLUGIN`: what a plugin in `spec.mode: DryRun`, or its shadow
//! candidate, would do, as a terraform-like diff. It reads the running host's report from
//! its status listener (`GET /preview/PLUGIN` on `kubewasm run --metrics-addr`, loopback
//! by default: for a host in a cluster, through `kubectl port-forward`); the host keeps the
//! latest finding on each object, bounded, excerpted, a Secret's data hidden. A host
//! running `--metrics-secure` is read over https:// with a bearer token (`--token`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// The status listener `kubewasm run` serves by default (its `--metrics-addr`).
const DEFAULT_URL: &str = "http://127.0.0.1:9090";
/// Bytes of a report read at most (the host bounds it far below this).
const MAX_BODY: usize = 64 << 20;
/// How long the host may take to answer.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Flags of `kubewasm preview`.
#[derive(Args, Debug)]
pub struct PreviewArgs {
    #[command(subcommand)]
    command: PreviewCommand,
}

#[derive(Subcommand, Debug)]
enum PreviewCommand {
    /// Print what a plugin in dry run (`spec.mode: DryRun`) and its shadow candidate
    /// (`spec.candidate`) would do, per object, as a running host found it.
    ///
    /// `+ create`, `~ update` with each field `path: from → to`, `- delete`, `! refused
    /// (code): reason` (what the API server would refuse, and why); for the candidate `≠
    /// diverges` with why, and a count of the objects on which it agrees with the serving
    /// version; then a summary line. The report is the host's, read from its status
    /// listener (`GET /preview/PLUGIN`); for a host in a cluster, forward its port first:
    /// `kubectl -n kubewasm-system port-forward deploy/kubewasm 9090`, then run this with
    /// the default --url (deploy/'s hosts run --metrics-secure: `--url
    /// https://127.0.0.1:9090 --insecure-skip-tls-verify --token TOKEN`).
    Report(ReportArgs),
}

/// Flags of `kubewasm preview report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The plugin: its Plugin object's name (directory mode: its file's name).
    plugin: String,
    /// The host's status listener, as `kubewasm run --metrics-addr` serves it (loopback
    /// by default; reach a host in a cluster with `kubectl port-forward`).
    #[arg(long, default_value = DEFAULT_URL, value_name = "URL")]
    url: String,
    /// A bearer token of a user allowed to get /preview/* (a host running
    /// --metrics-secure reviews it), e.g. `kubectl create token SA`.
    #[arg(long, env = "KUBEWASM_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// With an https:// --url: the CA (PEM) that signed the host's serving certificate.
    #[arg(long, value_name = "FILE", conflicts_with = "insecure_skip_tls_verify")]
    certificate_authority: Option<PathBuf>,
    /// With an https:// --url: accept the host's certificate unverified (its self-signed
    /// one, reached through `kubectl port-forward`).
    #[arg(long)]
    insecure_skip_tls_verify: bool,
    /// `text`: the diff; `json`: the host's report as served.
    #[arg(long, value_enum, default_value = "text")]
    output: Output,
}

/// How the report is printed.
#[derive(Copy, Clone, Debug, ValueEnum)]
enum Output {
    /// A terraform-like diff.
    Text,
    /// The host's report, as JSON.
    Json,
}

/// `kubewasm preview`.
pub async fn command(args: PreviewArgs) -> Result<()> {
    match args.command {
        PreviewCommand::Report(args) => report(args).await,
    }
}

/// `kubewasm preview report`: fetch the report and print it; an error when the host
/// cannot be reached or the plugin does not preview.
async fn report(args: ReportArgs) -> Result<()> {
    let url = format!(
        "{}/preview/{}",
        args.url.trim_end_matches('/'),
        path_segment(&args.plugin)
    );
    let (code, body) = tokio::time::timeout(TIMEOUT, get(&url, &args))
        .await
        .with_context(|| format!("GET {url}: no answer within {TIMEOUT:?}"))??;
    let json = serde_json::from_slice::<Value>(&body);
    if code != 200 {
        // The host says why in JSON; anything else is not a kubewasm host's /preview.
        let why = match &json {
            Ok(v) => v["error"].as_str().unwrap_or("no reason given").to_string(),
            // `--metrics-secure`'s refusals, in its words.
            Err(_) if code == 401 || code == 403 => format!(
                "{}: give --token, a token of a user allowed to get /preview/* \
                 (nonResourceURLs)",
                String::from_utf8_lossy(&body).trim()
            ),
            Err(_) => "the address answers, but not as a kubewasm host that serves /preview \
                       (is --url the host's --metrics-addr, and the host as new as this command?)"
                .to_string(),
        };
        bail!("GET {url}: {code}: {why}");
    }
    let json = json.with_context(|| format!("GET {url}: the answer is not JSON"))?;
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&json)?),
        Output::Text => print!("{}", render(&args.plugin, &json)),
    }
    Ok(())
}

/// A plugin name as one URL path segment (names are DNS labels; anything else is
/// percent-encoded rather than trusted).
fn path_segment(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// GET `url` over plain HTTP, or HTTPS (`run --metrics-secure`) as `args` say, with
/// `args`' token; its status and body, read up to [`MAX_BODY`].
async fn get(url: &str, args: &ReportArgs) -> Result<(u16, Bytes)> {
    let uri: hyper::Uri = url.parse().with_context(|| format!("bad --url: {url}"))?;
    let tls = match uri.scheme_str() {
        Some("http") => None,
        Some("https") => Some(tls_config(args)?),
        _ => bail!("--url {url}: http:// or https://"),
    };
    let authority = uri
        .authority()
        .with_context(|| format!("--url {url} names no host"))?
        .clone();
    let port = authority
        .port_u16()
        .unwrap_or(if tls.is_some() { 443 } else { 80 });
    let stream = tokio::net::TcpStream::connect((authority.host(), port))
        .await
        .with_context(|| {
            format!(
                "cannot reach the host at {authority}: is `kubewasm run` serving --metrics-addr \
                 there (for a host in a cluster, `kubectl port-forward` to it first)?"
            )
        })?;
    let mut request =
        hyper::Request::get(uri.path()).header(hyper::header::HOST, authority.as_str());
    if let Some(token) = &args.token {
        request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let request = request
        .body(Empty::<Bytes>::new())
        .context("building the request")?;
    let Some(config) = tls else {
        return exchange(stream, request, url).await;
    };
    let name = rustls::pki_types::ServerName::try_from(authority.host().to_string())
        .with_context(|| format!("--url {url}: not a TLS server name"))?;
    let stream = tokio_rustls::TlsConnector::from(config)
        .connect(name, stream)
        .await
        .with_context(|| {
            format!(
                "TLS with the host at {authority} (its certificate is self-signed unless it \
                 runs with --metrics-cert-path: --certificate-authority FILE, or \
                 --insecure-skip-tls-verify)"
            )
        })?;
    exchange(stream, request, url).await
}

/// One request on `stream`: its status and body.
async fn exchange<S>(
    stream: S,
    request: hyper::Request<Empty<Bytes>>,
    url: &str,
) -> Result<(u16, Bytes)>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .context("HTTP handshake with the host")?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "connection to the host ended");
        }
    });
    let response = sender
        .send_request(request)
        .await
        .with_context(|| format!("GET {url}"))?;
    let code = response.status().as_u16();
    let body = Limited::new(response.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| anyhow::anyhow!("reading the answer of {url}: {e}"))?
        .to_bytes();
    Ok((code, body))
}

/// The TLS client of an https:// --url: trusting --certificate-authority, or accepting
/// any certificate with --insecure-skip-tls-verify.
fn tls_config(args: &ReportArgs) -> Result<Arc<rustls::ClientConfig>> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS versions")?;
    let config = if args.insecure_skip_tls_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unverified(provider)))
            .with_no_client_auth()
    } else {
        // The host's certificate is self-signed or from the cluster's own CA, never one a
        // system's trust roots would hold: say which to trust.
        let Some(file) = &args.certificate_authority else {
            bail!(
                "an https:// --url needs --certificate-authority FILE (the CA of the host's \
                 --metrics-cert-path certificate) or --insecure-skip-tls-verify (its \
                 self-signed one)"
            );
        };
        let certs = CertificateDer::pem_file_iter(file)
            .and_then(|c| c.collect::<Result<Vec<_>, _>>())
            .with_context(|| format!("--certificate-authority {}", file.display()))?;
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(certs);
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    Ok(Arc::new(config))
}

/// Accepts any server certificate, its handshake signatures still checked
/// (`--insecure-skip-tls-verify`).
#[derive(Debug)]
struct Unverified(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The report as a terraform-like diff: each finding, then a summary line.
fn render(plugin: &str, report: &Value) -> String {
    let mut out = String::new();
    let objects = report["objects"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let mut agreements = 0u64;
    for e in objects {
        if e["divergence"]["result"] == "agrees" {
            agreements += 1;
            continue;
        }
        out.push_str(&entry(e));
    }
    let s = &report["summary"];
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    // A blank line between the findings and the summary.
    if !out.is_empty() {
        out.push('\n');
    }
    let mode = s["mode"].as_str().unwrap_or("?");
    let mut parts = Vec::new();
    if mode == "DryRun" {
        parts.push(format!(
            "{} event(s) in dry run, {} object(s) would change, {} refused",
            n(&s["events"]),
            n(&s["changes"]),
            n(&s["refusals"]),
        ));
    }
    if let Some(c) = s["candidate"].as_object() {
        parts.push(format!(
            "candidate {} ({}): {} event(s), agrees on {} object(s), diverges on {}",
            c.get("version").and_then(Value::as_str).unwrap_or("?"),
            c.get("digest")
                .and_then(Value::as_str)
                .unwrap_or("not running yet"),
            c.get("events").map(n).unwrap_or(0),
            c.get("agreements").map(n).unwrap_or(agreements),
            c.get("divergences").map(n).unwrap_or(0),
        ));
    }
    out.push_str(&format!("{plugin} ({mode}): {}", parts.join("; ")));
    out.push('\n');
    out
}

/// One finding: its line, and an update's or a create's fields indented below it.
fn entry(e: &Value) -> String {
    let object = e["object"].as_str().unwrap_or("?");
    let change = &e["change"];
    let candidate = e["source"] == "candidate";
    let mut out = match (&e["divergence"]["why"], change["action"].as_str()) {
        (Value::String(why), _) => format!("≠ diverges {object}: {why}\n"),
        (_, Some("create")) => format!("+ create {object}\n"),
        (_, Some("update")) => format!("~ update {object}\n"),
        (_, Some("delete")) => format!("- delete {object}\n"),
        (_, Some("refused")) => format!(
            "! refused {object} ({}): {}\n",
            change["code"].as_u64().unwrap_or(0),
            change["reason"].as_str().unwrap_or("")
        ),
        (_, Some("alreadyGone")) => format!("= already gone {object}\n"),
        _ => format!("= unchanged {object}\n"),
    };
    if candidate && !out.starts_with('≠') {
        out.insert_str(0, "(candidate) ");
    }
    let fields = change["fields"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    // As `kubewasm plan` prints a field: a create's `path: to`, else `path: from → to`.
    let create = change["action"] == "create";
    for f in fields {
        let path = f["path"].as_str().unwrap_or("?");
        let to = f["to"].as_str().unwrap_or("(removed)");
        out.push_str(&match (create, f["from"].as_str()) {
            (true, _) => format!("    {path}: {to}\n"),
            (false, Some(from)) => format!("    {path}: {from} → {to}\n"),
            (false, None) => format!("    {path}: (absent) → {to}\n"),
        });
    }
    if let Some(more) = change["more"].as_u64().filter(|m| *m > 0) {
        out.push_str(&format!("    … and {more} more fields\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_each_finding_and_a_summary() {
        let report = json!({
            "summary": {"mode": "DryRun", "events": 3, "changes": 2, "refusals": 1,
                "candidate": {"digest": "sha256:2", "version": "2.0.0",
                    "events": 3, "agreements": 1, "divergences": 1}},
            "objects": [
                {"object": "Service default/blog", "source": "dryRun", "verb": "create",
                 "trigger": "ContentSite default/blog",
                 "change": {"action": "create", "fields": [
                     {"path": "spec.ports[0].port", "to": "80"}]}},
                {"object": "MongoDB default/blog-db", "source": "dryRun", "verb": "create",
                 "trigger": "ContentSite default/blog",
                 "change": {"action": "update", "more": 2, "fields": [
                     {"path": "spec.members", "from": "3", "to": "5"}]}},
                {"object": "ConfigMap default/x", "source": "dryRun", "verb": "create",
                 "trigger": "ContentSite default/blog",
                 "change": {"action": "refused", "code": 422, "reason": "spec.x: Invalid value"}},
                {"object": "Service default/a", "source": "candidate", "verb": "create",
                 "trigger": "ContentSite default/a",
                 "change": {"action": "unchanged"}, "divergence": {"result": "agrees"}},
                {"object": "Service default/b", "source": "candidate", "verb": "create",
                 "trigger": "ContentSite default/b",
                 "change": {"action": "update", "fields": [
                     {"path": "spec.ports[0].port", "from": "80", "to": "81"}]},
                 "divergence": {"result": "diverges", "why": "spec.ports[0].port"}},
            ]
        });
        let text = render("web", &report);
        let expected = "\
+ create Service default/blog
    spec.ports[0].port: 80
~ update MongoDB default/blog-db
    spec.members: 3 → 5
    … and 2 more fields
! refused ConfigMap default/x (422): spec.x: Invalid value
≠ diverges Service default/b: spec.ports[0].port
    spec.ports[0].port: 80 → 81

web (DryRun): 3 event(s) in dry run, 2 object(s) would change, 1 refused; candidate 2.0.0 (sha256:2): 3 event(s), agrees on 1 object(s), diverges on 1
";
        assert_eq!(text, expected);
    }

    #[test]
    fn an_enforcing_plugin_with_a_candidate_says_only_the_candidates_counts() {
        let report = json!({
            "summary": {"mode": "Enforce", "events": 0, "changes": 0, "refusals": 0,
                "candidate": {"digest": "sha256:2", "version": "2.0.0",
                    "events": 1, "agreements": 1, "divergences": 0}},
            "objects": [
                {"object": "Service default/a", "source": "candidate", "verb": "create",
                 "trigger": "ContentSite default/a",
                 "change": {"action": "unchanged"}, "divergence": {"result": "agrees"}},
            ]
        });
        assert_eq!(
            render("web", &report),
            "web (Enforce): candidate 2.0.0 (sha256:2): 1 event(s), agrees on 1 object(s), diverges on 0\n"
        );
    }

    #[test]
    fn plugin_names_cannot_leave_their_path_segment() {
        assert_eq!(path_segment("web-1.x"), "web-1.x");
        assert_eq!(path_segment("../status?x"), "..%2Fstatus%3Fx");
    }
}
