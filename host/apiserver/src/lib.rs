//! `kubewasm-apiserver`: a small in-memory Kubernetes API server for tests,
//! demos and `kubewasm dev`.
//!
//! It serves discovery, CRUD, list/watch with resourceVersions (and 410 Expired
//! after compaction), server-side apply with managedFields and conflicts, merge and
//! JSON patches, the status subresource, CustomResourceDefinitions registered at
//! run time with OpenAPI schema validation of their objects, the `/openapi/v2|v3`
//! documents kubectl reads, Kubernetes protobuf bodies of built-in kinds, and
//! ownerReference garbage collection, over HTTP or HTTPS on loopback, so kube-rs and
//! kubectl talk to it exactly as to a cluster. See the README for what it does not
//! emulate.
//!
//! ```no_run
//! # async fn demo() -> Result<(), kubewasm_apiserver::Error> {
//! let server = kubewasm_apiserver::ApiServer::start(Default::default()).await?;
//! let client = kube::Client::try_from(server.client_config()).expect("client");
//! # let _ = client;
//! server.shutdown().await;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod apply;
mod builtins;
mod discovery;
mod error;
mod fieldset;
mod gc;
mod http;
pub mod kubeconfig;
mod meta;
mod openapi;
mod patch;
mod protobuf;
mod rbac;
mod registry;
mod review;
mod scale;
mod schema;
mod stall;
mod store;
mod table;
mod tls;
mod validation;
mod watch;

pub use error::Error;
pub use rbac::UserInfo;
pub use stall::RequestRecord;
pub use watch::WatchList;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// Server configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on (default `127.0.0.1:0`, an ephemeral port).
    pub bind: SocketAddr,
    /// Serve HTTPS with a generated CA.
    pub tls: bool,
    /// Require `Authorization: Bearer <token>` on every request.
    pub token: Option<String>,
    /// Watch history events kept; older resourceVersions get 410 Expired.
    pub history_limit: usize,
    /// Period of BOOKMARK events on watches that allow them.
    pub bookmark_interval: Duration,
    /// Authorize every request with the stored RBAC objects (Roles, ClusterRoles and
    /// their bindings, as kube-apiserver's `--authorization-mode=RBAC`), and check
    /// impersonation; off by default (every authenticated request is allowed everything).
    pub rbac: bool,
    /// More bearer tokens, each authenticating as its user (with [`Config::rbac`], the
    /// admin [`Config::token`] is a member of `system:masters`).
    pub users: Vec<(String, UserInfo)>,
    /// How `sendInitialEvents` (streaming lists) is treated: served by default, as by
    /// kube-apiserver 1.34 and later.
    pub watch_list: WatchList,
}

impl Config {
    /// This configuration with RBAC on: `admin_token` is cluster-admin (`system:masters`),
    /// each of `users` (token, user name) is judged by the stored roles and bindings.
    pub fn with_rbac(mut self, admin_token: &str, users: &[(&str, &str)]) -> Self {
        self.rbac = true;
        self.token = Some(admin_token.to_string());
        self.users = users
            .iter()
            .map(|(t, u)| (t.to_string(), UserInfo::new(*u, &[])))
            .collect();
        self
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            tls: false,
            token: None,
            history_limit: 10_000,
            bookmark_interval: Duration::from_secs(60),
            rbac: false,
            users: Vec::new(),
            watch_list: WatchList::Served,
        }
    }
}

/// A running API server; dropping it or calling [`ApiServer::shutdown`] stops it.
pub struct ApiServer {
    url: String,
    ca_pem: Option<String>,
    ca_der: Option<Vec<u8>>,
    token: Option<String>,
    store: Arc<store::Store>,
    stop: tokio::sync::watch::Sender<bool>,
    outage: tokio::sync::watch::Sender<bool>,
    stalls: Arc<stall::Stalls>,
    watch_list: Arc<std::sync::Mutex<WatchList>>,
    tasks: Vec<JoinHandle<()>>,
}

impl ApiServer {
    /// Binds, generates TLS material if asked, and starts serving.
    pub async fn start(config: Config) -> Result<ApiServer, Error> {
        let listener = TcpListener::bind(config.bind).await?;
        let addr = listener.local_addr()?;
        let host = if addr.ip().is_unspecified() {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            addr.ip()
        };
        let host_port = SocketAddr::new(host, addr.port()).to_string();
        let material = if config.tls {
            Some(tls::generate()?)
        } else {
            None
        };
        let scheme = if material.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{host_port}");
        let store = store::Store::new(config.history_limit);
        let (stop, shutdown) = tokio::sync::watch::channel(false);
        let (outage, outage_rx) = tokio::sync::watch::channel(false);
        let stalls = Arc::new(stall::Stalls::default());
        let watch_list = Arc::new(std::sync::Mutex::new(config.watch_list));
        let app = Arc::new(http::App {
            store: store.clone(),
            token: config.token.clone(),
            rbac: config.rbac,
            users: config.users.clone(),
            bookmark_interval: config.bookmark_interval,
            watch_list: watch_list.clone(),
            server_address: host_port,
            shutdown: shutdown.clone(),
            outage: outage_rx,
            stalls: stalls.clone(),
        });
        let router = http::router(app);
        let acceptor = material
            .as_ref()
            .map(|m| tokio_rustls::TlsAcceptor::from(m.server_config.clone()));
        let accept_shutdown = shutdown.clone();
        let accept_task = tokio::spawn(accept_loop(listener, router, acceptor, accept_shutdown));
        let gc_task = tokio::spawn(gc::run(store.clone(), shutdown));
        tracing::info!(%url, "embedded API server listening");
        Ok(ApiServer {
            url,
            ca_pem: material.as_ref().map(|m| m.ca_pem.clone()),
            ca_der: material.as_ref().map(|m| m.ca_der.clone()),
            token: config.token,
            store,
            stop,
            outage,
            stalls,
            watch_list,
            tasks: vec![accept_task, gc_task],
        })
    }

    /// Base URL (`http://127.0.0.1:PORT` or `https://...`).
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// A kube client configuration for this server (CA and token included).
    pub fn client_config(&self) -> kube::Config {
        let uri = self
            .url
            .parse()
            .unwrap_or_else(|_| ::http::Uri::from_static("http://127.0.0.1"));
        let mut c = kube::Config::new(uri);
        c.default_namespace = "default".into();
        if let Some(der) = &self.ca_der {
            c.root_cert = Some(vec![der.clone()]);
        }
        if let Some(t) = &self.token {
            c.auth_info.token = Some(secrecy::SecretString::from(t.clone()));
        }
        c
    }

    /// A kubeconfig (context `kubewasm-dev`, namespace `default`).
    pub fn kubeconfig(&self) -> String {
        kubeconfig::render(&self.url, self.ca_pem.as_deref(), self.token.as_deref())
            .unwrap_or_default()
    }

    /// A kubeconfig authenticating with `token` (one of [`Config::users`]) instead of the
    /// admin token.
    pub fn kubeconfig_for(&self, token: &str) -> String {
        kubeconfig::render(&self.url, self.ca_pem.as_deref(), Some(token)).unwrap_or_default()
    }

    /// Writes the kubeconfig to `path`.
    pub fn write_kubeconfig(&self, path: &std::path::Path) -> Result<(), Error> {
        let text = kubeconfig::render(&self.url, self.ca_pem.as_deref(), self.token.as_deref())?;
        std::fs::write(path, text)?;
        Ok(())
    }

    /// The CA certificate (PEM) when serving TLS.
    pub fn ca_pem(&self) -> Option<String> {
        self.ca_pem.clone()
    }

    /// The bearer token clients must send, if any.
    pub fn token(&self) -> Option<String> {
        self.token.clone()
    }

    /// Stores `objects`, in order, as a cluster already holds them: the starting state
    /// of a test. Each is validated as a create is (name, CRD schema after pruning, a
    /// CRD's structure; a CRD registers its kind for the objects after it), its namespace
    /// is created when missing, and it keeps the `uid`, `creationTimestamp`, `generation`,
    /// `deletionTimestamp` and `status` it is written with. Its field owners are its
    /// `metadata.managedFields` as written, else `manager` owns every field but `status`
    /// as a server-side apply would (`status` is owned by no one). Stored under one lock,
    /// so the garbage collector never sees an owner missing that comes later in the list.
    /// The objects as stored; the first refusal ends it (earlier objects stay).
    pub fn seed(
        &self,
        objects: Vec<serde_json::Value>,
        manager: &str,
    ) -> Result<Vec<serde_json::Value>, Error> {
        self.store
            .seed(objects, manager)
            .map_err(|e| Error::Refused {
                code: e.code,
                message: e.message,
            })
    }

    /// From now on, treats `sendInitialEvents` as `watch_list` says (a server replaced by
    /// one configured otherwise; open watches go on).
    pub fn set_watch_list(&self, watch_list: WatchList) {
        *kubewasm_core::sync::lock(&self.watch_list) = watch_list;
    }

    /// Drops all watch history: a watch from any older resourceVersion now gets 410 Expired.
    pub fn compact(&self) {
        self.store.compact();
    }

    /// Simulates a watch outage (a partitioned or restarting server): closes every open
    /// watch stream and holds new watch requests until [`ApiServer::resume_watches`].
    /// Reads and writes keep working. With [`ApiServer::compact`] in between, clients
    /// come back to `410 Gone` and must relist.
    pub fn pause_watches(&self) {
        self.outage.send_replace(true);
    }

    /// Ends a simulated watch outage; held watch requests proceed.
    pub fn resume_watches(&self) {
        self.outage.send_replace(false);
    }

    /// Cuts one client off without closing its connections: its requests (named by the
    /// bearer token it sends; a server started without [`Config::token`] accepts every
    /// token, so each client can be given its own) are held unanswered until
    /// [`ApiServer::release_client`]; a held request its client gives up on is dropped,
    /// never executed. Streams already open (watches) keep flowing.
    pub fn stall_client(&self, token: &str) {
        self.stalls.stall(token);
    }

    /// Lets a stalled client's held requests proceed, and its new ones through.
    pub fn release_client(&self, token: &str) {
        self.stalls.release(token);
    }

    /// Starts recording every request (client, method, path, arrival, execution) for
    /// [`ApiServer::requests`].
    pub fn record_requests(&self) {
        self.stalls.record(true);
    }

    /// The requests recorded since [`ApiServer::record_requests`], in order of arrival.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.stalls.requests()
    }

    /// Requests of the client with `token` held right now (among those recorded).
    pub fn held_requests(&self, token: &str) -> usize {
        self.stalls.held(token)
    }

    /// Stops serving and waits for the server tasks to end.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        for t in std::mem::take(&mut self.tasks) {
            let _ = t.await;
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    router: axum::Router,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => return,
        };
        let (tcp, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                continue;
            }
        };
        let router = router.clone();
        let acceptor = acceptor.clone();
        let mut conn_shutdown = shutdown.clone();
        tokio::spawn(async move {
            let service = TowerToHyperService::new(router);
            let builder = auto::Builder::new(TokioExecutor::new());
            let served = async {
                match acceptor {
                    Some(acc) => match acc.accept(tcp).await {
                        Ok(tls) => {
                            builder
                                .serve_connection_with_upgrades(TokioIo::new(tls), service)
                                .await
                        }
                        Err(e) => {
                            tracing::debug!(%peer, error = %e, "tls handshake failed");
                            Ok(())
                        }
                    },
                    None => {
                        builder
                            .serve_connection_with_upgrades(TokioIo::new(tcp), service)
                            .await
                    }
                }
            };
            tokio::select! {
                r = served => if let Err(e) = r {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                },
                _ = conn_shutdown.changed() => {}
            }
        });
    }
}
