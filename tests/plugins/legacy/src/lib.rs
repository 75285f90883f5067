//! legacy: a plugin built against `kubewasm:plugin@0.1.0`, the WIT every plugin deployed
//! before projections was built for (the frozen copy the host keeps). It watches the
//! ConfigMaps labelled `kubewasm.dev/legacy=<name>` (settings `name`, default `legacy`),
//! reads each back with `host.get`, and writes what it received into `<cm>-out`:
//! `object` (the event's object) and `got` (the read), as JSON text.

use serde_json::{Value, json};

wit_bindgen::generate!({
    path: "../../../host/runtime/wit/v0.1",
    world: "kubewasm:plugin/plugin",
});

use exports::kubewasm::plugin::handler::Guest;
use kubewasm::plugin::host;
use kubewasm::plugin::types::{
    CreateIntent, Event, EventType, Grant, HandleError, Intent, Manifest, ResourceRef, TypeRef,
    Verb, Watch,
};

struct Legacy;

fn name_of(settings: &Option<String>) -> String {
    settings
        .as_deref()
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .and_then(|s| s.get("name").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| "legacy".into())
}

impl Guest for Legacy {
    fn describe(settings: Option<String>) -> Result<Manifest, String> {
        let name = name_of(&settings);
        Ok(Manifest {
            watches: vec![Watch {
                id: "configmaps".into(),
                resource: ResourceRef::Kind(TypeRef {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                }),
                namespace: None,
                label_selector: Some(format!("kubewasm.dev/legacy={name}")),
                field_selector: None,
            }],
            grants: vec![Grant {
                api_groups: vec!["".into()],
                kinds: vec!["ConfigMap".into()],
                namespaces: vec![],
                verbs: vec![Verb::Create],
                allow_force: false,
            }],
            reads: vec![],
            name,
            version: "0.1.0".into(),
        })
    }

    fn handle(event: Event, _settings: Option<String>) -> Result<Vec<Intent>, HandleError> {
        if event.event_type == EventType::Deleted {
            return Ok(vec![]);
        }
        let obj: Value = serde_json::from_str(&event.object).map_err(|e| HandleError {
            message: e.to_string(),
            retry: false,
        })?;
        let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default");
        let cm = obj["metadata"]["name"].as_str().unwrap_or("unnamed");
        let got = match host::get("v1", "ConfigMap", Some(ns), cm) {
            Ok(o) => o.unwrap_or_default(),
            Err(e) => format!("error: {e}"),
        };
        Ok(vec![Intent::Create(CreateIntent {
            object: json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": format!("{cm}-out"), "namespace": ns},
                           "data": {"object": event.object, "got": got}})
            .to_string(),
            force: false,
            owned_by_trigger: true,
        })])
    }
}

export!(Legacy);
