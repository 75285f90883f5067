//! {{name}}: every ConfigMap labelled `kubewasm.dev/copy: "true"` gets a copy named
//! `<name>-<suffix>` in its namespace, annotated `kubewasm.dev/copied-from: <ns>/<name>` and
//! owned by the original (so it is garbage-collected with it). The copy carries no labels, so
//! it is not copied again.

use kubewasm_sdk::{Event, Grant, HandleError, Intent, Manifest, ObjectExt, Plugin, Result, Watch, log};
use serde::Deserialize;
use serde_json::{Value, json};

/// The plugin's name: the file name of its component and its field manager.
pub const NAME: &str = "{{name}}";
/// The id of the ConfigMap watch (events carry it).
pub const WATCH_ID: &str = "configmaps";
/// Which ConfigMaps are copied.
pub const SELECTOR: &str = "kubewasm.dev/copy=true";
/// The annotation naming the original.
pub const COPIED_FROM: &str = "kubewasm.dev/copied-from";

/// `{{name}}.yaml`.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// The copy of NAME is called NAME-<suffix>.
    pub suffix: String,
}

impl Default for Settings {
    fn default() -> Self {
        Self { suffix: "copy".into() }
    }
}

/// The plugin.
pub struct Copier;

impl Plugin for Copier {
    type Settings = Settings;

    fn describe(_: &Settings) -> std::result::Result<Manifest, String> {
        Ok(Manifest::new(NAME, "0.1.0")
            .watch(Watch::kind(WATCH_ID, "v1", "ConfigMap").label_selector(SELECTOR)) // what to receive
            .grant(Grant::on("", "ConfigMap").create())) // what it may write
    }

    fn handle(event: &Event, settings: &Settings) -> Result<Vec<Intent>> {
        if event.is_deleted() {
            return Ok(vec![]); // the copy is owned by the original: GC removes it
        }
        let cm = event.object()?; // malformed JSON: a permanent error
        if cm.is_being_deleted() {
            return Ok(vec![]);
        }
        let name = cm.require_name()?;
        let namespace = cm
            .namespace()
            .ok_or_else(|| HandleError::permanent("ConfigMap has no metadata.namespace"))?;
        let copy = format!("{name}-{}", settings.suffix);
        log::info!("copying ConfigMap {namespace}/{name} to {copy}");
        let data = cm.get("data").filter(|d| d.is_object()).cloned().unwrap_or_else(|| json!({}));
        Ok(vec![
            Intent::create(json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": copy,
                    "namespace": namespace,
                    "annotations": {COPIED_FROM: format!("{namespace}/{name}")},
                },
                "data": data,
            }))
            .owned_by_trigger()
            .into(),
        ])
    }
}

kubewasm_sdk::export_plugin!(Copier);

#[cfg(test)]
mod tests {
    use super::*;

    fn cm() -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "app", "namespace": "web", "labels": {"kubewasm.dev/copy": "true"}},
               "data": {"k": "v"}})
    }

    #[test]
    fn copies_with_the_suffix() {
        let settings = Settings { suffix: "bak".into() };
        let out = Copier::handle(&Event::added(WATCH_ID, &cm()), &settings).expect("handled");
        assert_eq!(out.len(), 1);
        let Intent::Create(create) = &out[0] else { panic!("not a create: {out:?}") };
        assert_eq!(create.object["metadata"]["name"], "app-bak");
        assert_eq!(create.object["metadata"]["annotations"][COPIED_FROM], "web/app");
    }
}
