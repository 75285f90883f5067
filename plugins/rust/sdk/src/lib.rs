//! # kubewasm-sdk: write kubewasm plugins in Rust
//!
//! A kubewasm plugin is a WebAssembly component that tells the host what it watches and
//! may write ([`Manifest`]), then turns each change of a watched object ([`Event`]) into
//! writes ([`Intent`]s) that the host applies with server-side apply. This crate wraps the
//! `wit/plugin.wit` bindings so a plugin is a plain Rust type:
//!
//! ```
//! use kubewasm_sdk::{Event, Grant, Intent, Manifest, ObjectExt, Plugin, Result};
//! use serde_json::json;
//!
//! struct Labeler;
//!
//! impl Plugin for Labeler {
//!     type Settings = serde_json::Value;
//!
//!     fn describe(_settings: &Self::Settings) -> std::result::Result<Manifest, String> {
//!         Ok(Manifest::new("labeler", "0.1.0")
//!             .watch_kind("cms", "v1", "ConfigMap")
//!             .grant(Grant::on("", "ConfigMap").create()))
//!     }
//!
//!     fn handle(event: &Event, _settings: &Self::Settings) -> Result<Vec<Intent>> {
//!         if event.is_deleted() {
//!             return Ok(vec![]);
//!         }
//!         let cm = event.object()?;
//!         let copy = json!({
//!             "apiVersion": "v1", "kind": "ConfigMap",
//!             "metadata": {"name": format!("{}-copy", cm.require_name()?),
//!                          "namespace": cm.namespace()},
//!             "data": cm["data"],
//!         });
//!         Ok(vec![Intent::create(copy).owned_by_trigger().into()])
//!     }
//! }
//!
//! kubewasm_sdk::export_plugin!(Labeler);
//! # let ev = Event::added("cms", &json!({"apiVersion": "v1", "kind": "ConfigMap",
//! #     "metadata": {"name": "a", "namespace": "n"}, "data": {"k": "v"}}));
//! # let out = kubewasm_sdk::run::handle::<Labeler>(&ev, None).unwrap();
//! # assert_eq!(out.len(), 1);
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2` (`crate-type = ["cdylib"]`).
//! Everything but [`log`] and [`host`] is pure Rust and runs natively in `cargo test`;
//! natively those two use a stand-in ([`testing`]).
#![deny(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod bindings;
pub mod error;
pub mod event;
pub mod host;
pub mod intent;
pub mod log;
pub mod manifest;
pub mod object;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
mod wit;

pub use error::{Context, HandleError, Result};
pub use event::{Event, EventType};
pub use intent::{
    CreateIntent, DeleteIntent, Intent, ObjectRef, PatchIntent, PatchStrategy, Propagation,
};
pub use manifest::{Grant, Manifest, Read, ResourceRef, Verb, Watch};
pub use object::{Condition, ObjectExt, OwnerReference};

/// Re-exported so plugins can name JSON values without their own dependency line.
pub use serde_json;

/// k8s-openapi, re-exported so the version always matches the SDK's (feature `k8s-openapi`).
#[cfg(feature = "k8s-openapi")]
pub use k8s_openapi;

use serde::de::DeserializeOwned;

/// A kubewasm plugin. Implement it on a unit struct and pass the type to
/// [`export_plugin!`].
///
/// Plugins are stateless: both functions are called with the settings file beside the
/// plugin (`NAME.yaml`/`NAME.json`, converted to JSON) decoded into [`Plugin::Settings`].
/// A missing file (or `null`) gives `Settings::default()`.
pub trait Plugin {
    /// The settings type: `serde_json::Value` for free-form settings, or your own
    /// `#[derive(Deserialize, Default)]` struct.
    type Settings: DeserializeOwned + Default;

    /// Called once per load: the plugin's name, version, watches, grants and reads.
    /// An `Err` rejects the plugin.
    fn describe(settings: &Self::Settings) -> std::result::Result<Manifest, String>;

    /// Called for every event on a watched object. Returns the writes to make; the host
    /// applies them in order, or none if any falls outside the grants.
    fn handle(event: &Event, settings: &Self::Settings) -> Result<Vec<Intent>>;
}

/// Runs a [`Plugin`] the way the host does (settings parsing, manifest validation),
/// natively — for tests, benchmarks and the export glue.
pub mod run {
    use super::*;

    /// Decodes the settings JSON the host passes. `None`, empty or `null` give the default.
    pub fn settings<S: DeserializeOwned + Default>(
        settings: Option<&str>,
    ) -> std::result::Result<S, String> {
        match settings.map(str::trim) {
            None | Some("") | Some("null") => Ok(S::default()),
            Some(text) => serde_json::from_str(text).map_err(|e| format!("invalid settings: {e}")),
        }
    }

    /// `describe` as the host calls it: settings JSON in, validated manifest out.
    pub fn describe<P: Plugin>(settings: Option<&str>) -> std::result::Result<Manifest, String> {
        let settings = self::settings::<P::Settings>(settings)?;
        let manifest = P::describe(&settings)?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// `handle` as the host calls it: settings JSON in. Invalid settings are a
    /// permanent error.
    pub fn handle<P: Plugin>(event: &Event, settings: Option<&str>) -> Result<Vec<Intent>> {
        let settings = self::settings::<P::Settings>(settings).map_err(HandleError::permanent)?;
        P::handle(event, &settings)
    }
}

/// Glue used by [`export_plugin!`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::bindings::exports::kubewasm::plugin::handler::Guest;
    pub use crate::bindings::kubewasm::plugin::types::{
        Event as WitEvent, HandleError as WitHandleError, Intent as WitIntent,
        Manifest as WitManifest,
    };
    pub use std::option::Option;
    pub use std::result::Result;
    pub use std::string::String;
    pub use std::vec::Vec;

    use crate::Plugin;

    /// The exported `describe`.
    pub fn describe<P: Plugin>(settings: Option<String>) -> Result<WitManifest, String> {
        crate::run::describe::<P>(settings.as_deref()).map(crate::wit::manifest)
    }

    /// The exported `handle`.
    pub fn handle<P: Plugin>(
        event: WitEvent,
        settings: Option<String>,
    ) -> Result<Vec<WitIntent>, WitHandleError> {
        let event = crate::wit::event(event);
        crate::run::handle::<P>(&event, settings.as_deref())
            .map(|intents| intents.into_iter().map(crate::wit::intent).collect())
            .map_err(crate::wit::handle_error)
    }
}

/// Exports a [`Plugin`] as the component's `handler` interface.
///
/// Use it once, at the root of the plugin crate: `kubewasm_sdk::export_plugin!(MyPlugin);`.
/// It only emits code when compiling for wasm32, so the crate still builds and tests
/// natively.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct KubewasmPluginExport;

            impl $crate::__private::Guest for KubewasmPluginExport {
                fn describe(
                    settings: $crate::__private::Option<$crate::__private::String>,
                ) -> $crate::__private::Result<
                    $crate::__private::WitManifest,
                    $crate::__private::String,
                > {
                    $crate::__private::describe::<$plugin>(settings)
                }

                fn handle(
                    event: $crate::__private::WitEvent,
                    settings: $crate::__private::Option<$crate::__private::String>,
                ) -> $crate::__private::Result<
                    $crate::__private::Vec<$crate::__private::WitIntent>,
                    $crate::__private::WitHandleError,
                > {
                    $crate::__private::handle::<$plugin>(event, settings)
                }
            }

    $crate::bindings::export_world!(KubewasmPluginExport with_types_in $crate::bindings);
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Default)]
    struct Settings {
        greeting: String,
    }

    struct P;
    impl Plugin for P {
        type Settings = Settings;
        fn describe(s: &Settings) -> std::result::Result<Manifest, String> {
            Ok(
                Manifest::new(format!("p{}", s.greeting.len()), "1").watch_kind(
                    "x",
                    "v1",
                    "ConfigMap",
                ),
            )
        }
        fn handle(_e: &Event, s: &Settings) -> Result<Vec<Intent>> {
            if s.greeting.is_empty() {
                Err(HandleError::retry("no greeting"))
            } else {
                Ok(vec![])
            }
        }
    }

    #[test]
    fn run_parses_settings() {
        assert_eq!(run::describe::<P>(None).unwrap().name, "p0");
        assert_eq!(run::describe::<P>(Some("null")).unwrap().name, "p0");
        assert_eq!(
            run::describe::<P>(Some(r#"{"greeting":"hi"}"#))
                .unwrap()
                .name,
            "p2"
        );
        assert!(run::describe::<P>(Some("[")).is_err());
        let ev = Event::new(EventType::Added, "x", "{}");
        assert!(
            run::handle::<P>(&ev, Some(r#"{"greeting":"hi"}"#))
                .unwrap()
                .is_empty()
        );
        assert!(run::handle::<P>(&ev, None).unwrap_err().retry);
        assert!(!run::handle::<P>(&ev, Some("{{")).unwrap_err().retry);
    }

    #[test]
    fn private_glue_converts() {
        let m = __private::describe::<P>(None).unwrap();
        assert_eq!(m.name, "p0");
        let err = __private::handle::<P>(
            __private::WitEvent {
                event_type: bindings::kubewasm::plugin::types::EventType::Added,
                watch_id: "x".into(),
                object: "{}".into(),
                old_object: None,
            },
            None,
        )
        .unwrap_err();
        assert!(err.retry);
    }
}
