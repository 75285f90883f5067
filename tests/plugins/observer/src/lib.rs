//! observer: watches one kind with the projection its settings declare and writes nothing,
//! so what a host running it holds is its cache (host/cli/benches/cache_memory.rs).
//!
//! Settings: `apiVersion` and `kind` (default `mongodb.com/v1` `MongoDB`), `fields` (the
//! watch's projection, a list of paths; absent: whole objects).

use serde_json::Value;

wit_bindgen::generate!({
    path: "../../../wit",
    world: "kubewasm:plugin/plugin",
});

use exports::kubewasm::plugin::handler::Guest;
use kubewasm::plugin::types::{Event, HandleError, Intent, Manifest, ResourceRef, TypeRef, Watch};

struct Observer;

impl Guest for Observer {
    fn describe(settings: Option<String>) -> Result<Manifest, String> {
        let s: Value = match settings.as_deref() {
            Some(t) => serde_json::from_str(t).map_err(|e| format!("settings: {e}"))?,
            None => Value::Null,
        };
        let text = |key: &str, default: &str| {
            s.get(key)
                .and_then(Value::as_str)
                .unwrap_or(default)
                .to_string()
        };
        let fields = s
            .get("fields")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        Ok(Manifest {
            name: "observer".into(),
            version: "1".into(),
            watches: vec![Watch {
                id: "observed".into(),
                resource: ResourceRef::Kind(TypeRef {
                    api_version: text("apiVersion", "mongodb.com/v1"),
                    kind: text("kind", "MongoDB"),
                }),
                namespace: None,
                label_selector: None,
                field_selector: None,
                fields,
            }],
            grants: vec![],
            reads: vec![],
        })
    }

    fn handle(_event: Event, _settings: Option<String>) -> Result<Vec<Intent>, HandleError> {
        Ok(vec![])
    }
}

export!(Observer);
