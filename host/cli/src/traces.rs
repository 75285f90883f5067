//! Traces of `run` and `dev`: one OpenTelemetry trace per event (the engine's
//! `event::layers::Trace`), exported over OTLP/HTTP with protobuf when the standard
//! variables name an endpoint, and nothing at all otherwise.
//!
//! On when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set,
//! unless `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`. The SDK honours the
//! rest: headers, timeout and compression (`OTEL_EXPORTER_OTLP_[TRACES_]*`), the resource
//! (`OTEL_SERVICE_NAME`, default `kubewasm`; `OTEL_RESOURCE_ATTRIBUTES`), the sampler
//! (`OTEL_TRACES_SAMPLER[_ARG]`) and the batch processor (`OTEL_BSP_*`). Only
//! `http/protobuf` is built in: `grpc` or `http/json` is refused at start rather than
//! silently sent as protobuf to a port that does not speak it.

use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use opentelemetry::KeyValue;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::resource::{EnvResourceDetector, TelemetryResourceDetector};
use opentelemetry_sdk::trace::SdkTracerProvider;

/// The installed tracer provider; [`Traces::shutdown`] exports what is left.
pub(crate) struct Traces {
    provider: SdkTracerProvider,
}

/// A variable of the environment, `None` when unset or empty (the specification treats
/// an empty value as unset).
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Traces {
    /// The exporter `OTEL_*` configures, installed as OpenTelemetry's global tracer
    /// provider; `None` (nothing installed, nothing exported) when no endpoint is set.
    pub(crate) fn from_env() -> Result<Option<Traces>> {
        let endpoint = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"));
        let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let exporter = var("OTEL_TRACES_EXPORTER").unwrap_or_else(|| "otlp".into());
        if endpoint.is_none() || disabled || exporter.eq_ignore_ascii_case("none") {
            return Ok(None);
        }
        if !exporter.eq_ignore_ascii_case("otlp") {
            bail!("OTEL_TRACES_EXPORTER={exporter} is not supported: `otlp` or `none`");
        }
        let protocol = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .unwrap_or_else(|| "http/protobuf".into());
        if protocol != "http/protobuf" {
            bail!(
                "OTLP protocol {protocol} is not built in: set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf \
                 (a collector's OTLP/HTTP port, 4318 by default)"
            );
        }
        // reqwest takes rustls's process default (as the OCI client installs it).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = OnRuntime {
            client: reqwest::Client::builder()
                .timeout(timeout())
                .build()
                .context("building the OTLP HTTP client")?,
            runtime: tokio::runtime::Handle::current(),
        };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_http_client(client)
            .build()
            .context("configuring the OTLP trace exporter from OTEL_*")?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource())
            .build();
        opentelemetry::global::set_tracer_provider(provider.clone());
        tracing::info!(
            endpoint = endpoint.as_deref(),
            "exporting traces over OTLP/HTTP"
        );
        Ok(Some(Traces { provider }))
    }

    /// Export the spans not sent yet and stop: the batch processor's last export, off the
    /// async threads (it blocks until the collector answers or the export times out).
    pub(crate) async fn shutdown(self) {
        let provider = self.provider;
        match tokio::task::spawn_blocking(move || provider.shutdown()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "exporting the last spans failed"),
            Err(e) => tracing::warn!(error = %e, "exporting the last spans failed"),
        }
    }
}

/// `service.name` `kubewasm` unless `OTEL_SERVICE_NAME` or `OTEL_RESOURCE_ATTRIBUTES`
/// names it; `service.version` the binary's.
fn resource() -> Resource {
    let mut builder = Resource::builder_empty()
        .with_service_name("kubewasm")
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .with_detectors(&[
            Box::new(TelemetryResourceDetector),
            Box::new(EnvResourceDetector::new()),
        ]);
    if let Some(name) = var("OTEL_SERVICE_NAME") {
        builder = builder.with_service_name(name);
    }
    builder.build()
}

/// One export request's deadline: `OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT` in milliseconds,
/// 10 s by default, as the specification says.
fn timeout() -> Duration {
    var("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
        .or_else(|| var("OTEL_EXPORTER_OTLP_TIMEOUT"))
        .and_then(|ms| ms.trim().parse().ok())
        .map_or(Duration::from_secs(10), Duration::from_millis)
}

/// The exporter's HTTP client: the reqwest the host already builds on (the OCI client's),
/// each request run on the host's runtime. The SDK's batch processor exports from a thread
/// of its own, where reqwest would find no runtime to connect on.
#[derive(Debug)]
struct OnRuntime {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        self.runtime
            .spawn(async move { client.send_bytes(request).await })
            .await?
    }
}
