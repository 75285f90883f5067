//! The Wasm OCI artifact layout (CNCF TAG Runtime): what `push` writes and what `pull`
//! accepts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The config media type of a Wasm OCI artifact.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The media type of the component layer `push` writes.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// Layer media types `pull` accepts as a component: the artifact layout's, and the older
/// `wasm-to-oci` one other tools still write.
pub const WASM_LAYER_MEDIA_TYPES: &[&str] = &[
    WASM_LAYER_MEDIA_TYPE,
    "application/vnd.wasm.content.layer.v1+wasm",
];

pub(crate) const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub(crate) const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub(crate) const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub(crate) const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
/// What `pull` asks for: manifests, and indexes so that one can be named when refused.
pub(crate) const ACCEPTED_MANIFESTS: &[&str] =
    &[OCI_MANIFEST, DOCKER_MANIFEST, OCI_INDEX, DOCKER_LIST];

/// Registries refuse manifests over 4 MiB; so does `pull`, before parsing.
pub(crate) const MAX_MANIFEST_BYTES: usize = 4 << 20;

/// `sha256:HEX` of `bytes`.
pub(crate) fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// A content descriptor.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// An image manifest, or (with `manifests`) an index: only what deciding needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Manifest {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Descriptor>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<Descriptor>,
    /// Present in an image index / manifest list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifests: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// The one wasm layer of a manifest, or why there is none.
pub(crate) fn wasm_layer(manifest_bytes: &[u8]) -> Result<Descriptor, String> {
    let manifest: Manifest = serde_json::from_slice(manifest_bytes)
        .map_err(|e| format!("the manifest is not an OCI manifest: {e}"))?;
    let media_type = manifest.media_type.as_deref().unwrap_or("");
    if manifest.manifests.is_some() || media_type == OCI_INDEX || media_type == DOCKER_LIST {
        return Err(format!(
            "an image index ({}), not a single artifact manifest",
            if media_type.is_empty() {
                "with manifests"
            } else {
                media_type
            }
        ));
    }
    if manifest.schema_version != 2 {
        return Err(format!(
            "manifest schemaVersion {}, not 2",
            manifest.schema_version
        ));
    }
    if !media_type.is_empty() && media_type != OCI_MANIFEST && media_type != DOCKER_MANIFEST {
        return Err(format!("a manifest of media type {media_type}"));
    }
    let kinds = || {
        manifest
            .layers
            .iter()
            .map(|l| l.media_type.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match manifest.layers.as_slice() {
        [layer] if WASM_LAYER_MEDIA_TYPES.contains(&layer.media_type.as_str()) => {
            crate::reference::check_digest(&layer.digest)
                .map_err(|e| format!("its wasm layer has an unusable {e}"))?;
            if layer.size < 0 {
                return Err(format!("its wasm layer declares size {}", layer.size));
            }
            Ok(layer.clone())
        }
        [] => Err("a manifest without layers".into()),
        [_] => Err(format!(
            "one layer of media type {} (a wasm layer is one of {})",
            kinds(),
            WASM_LAYER_MEDIA_TYPES.join(", ")
        )),
        many => Err(format!(
            "{} layers ({}); a Wasm artifact has exactly one wasm layer",
            many.len(),
            kinds()
        )),
    }
}

/// Why `wasm` is not a WebAssembly component, from its 8-byte header; `Ok` when it is one.
pub fn check_component_header(wasm: &[u8]) -> Result<(), &'static str> {
    // After the magic: a 16-bit version, then a 16-bit layer (0 module, 1 component).
    match wasm {
        [0, b'a', b's', b'm', _, _, 0x01, 0x00, ..] => Ok(()),
        [0, b'a', b's', b'm', 0x01, 0x00, 0x00, 0x00, ..] => {
            Err("a core WebAssembly module, not a component (kubewasm plugins are components)")
        }
        [0, b'a', b's', b'm', ..] => Err("a WebAssembly binary of an unknown layer or version"),
        _ => Err("not a WebAssembly binary (no \\0asm header)"),
    }
}

/// The component's top-level imports and exports (its world), as the artifact config
/// records them.
fn world_of(wasm: &[u8]) -> Result<(Vec<String>, Vec<String>), String> {
    use wasmparser::{Parser, Payload};
    let (mut imports, mut exports) = (Vec::new(), Vec::new());
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(wasm) {
        match payload.map_err(|e| format!("not a valid component: {e}"))? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 0 => {
                for import in reader {
                    let import = import.map_err(|e| format!("not a valid component: {e}"))?;
                    imports.push(import.name.full_name().into_owned());
                }
            }
            Payload::ComponentExportSection(reader) if depth == 0 => {
                for export in reader {
                    let export = export.map_err(|e| format!("not a valid component: {e}"))?;
                    exports.push(export.name.full_name().into_owned());
                }
            }
            _ => {}
        }
    }
    Ok((imports, exports))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WasmConfig<'a> {
    created: &'a str,
    architecture: &'a str,
    os: &'a str,
    layer_digests: Vec<String>,
    component: ComponentInfo,
}

#[derive(Serialize)]
struct ComponentInfo {
    exports: Vec<String>,
    imports: Vec<String>,
}

/// The blobs and manifest of one pushed component.
pub(crate) struct Artifact {
    pub config: Vec<u8>,
    pub config_digest: String,
    pub layer_digest: String,
    pub manifest: Vec<u8>,
    pub manifest_digest: String,
}

/// The annotation naming a layer's file (what `oras pull` writes it as).
const TITLE: &str = "org.opencontainers.image.title";

/// The Wasm OCI artifact of component `wasm`, its layer titled `title` (a file name).
/// Reproducible: the same bytes make the same manifest digest (`created` is the Unix
/// epoch, as reproducible image builders write it), so pushing an unchanged plugin again
/// changes nothing a Plugin points at.
pub(crate) fn build(wasm: &[u8], title: &str) -> Result<Artifact, String> {
    check_component_header(wasm).map_err(str::to_string)?;
    let (imports, exports) = world_of(wasm)?;
    let layer_digest = sha256_digest(wasm);
    let config = serde_json::to_vec(&WasmConfig {
        created: "1970-01-01T00:00:00Z",
        architecture: "wasm",
        os: "wasip2",
        layer_digests: vec![layer_digest.clone()],
        component: ComponentInfo { exports, imports },
    })
    .map_err(|e| format!("encoding the config: {e}"))?;
    let config_digest = sha256_digest(&config);
    let size = |n: usize| i64::try_from(n).map_err(|_| "the component is too large".to_string());
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(OCI_MANIFEST.into()),
        artifact_type: None,
        config: Some(Descriptor {
            media_type: WASM_CONFIG_MEDIA_TYPE.into(),
            digest: config_digest.clone(),
            size: size(config.len())?,
            annotations: None,
        }),
        layers: vec![Descriptor {
            media_type: WASM_LAYER_MEDIA_TYPE.into(),
            digest: layer_digest.clone(),
            size: size(wasm.len())?,
            annotations: Some(BTreeMap::from([(TITLE.to_string(), title.to_string())])),
        }],
        manifests: None,
        annotations: None,
    };
    let manifest =
        serde_json::to_vec(&manifest).map_err(|e| format!("encoding the manifest: {e}"))?;
    let manifest_digest = sha256_digest(&manifest);
    Ok(Artifact {
        config,
        config_digest,
        layer_digest,
        manifest,
        manifest_digest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component: header only.
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\x00\x01\x00";

    fn manifest(layers: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.empty.v1+json",
                       "digest": sha256_digest(b"{}"), "size": 2},
            "layers": layers,
        }))
        .expect("json")
    }

    fn layer(media_type: &str) -> serde_json::Value {
        serde_json::json!({"mediaType": media_type, "digest": sha256_digest(b"x"), "size": 1})
    }

    #[test]
    fn header_check() {
        assert!(check_component_header(EMPTY_COMPONENT).is_ok());
        assert!(
            check_component_header(b"\0asm\x01\0\0\0")
                .expect_err("module")
                .contains("core WebAssembly module")
        );
        assert!(
            check_component_header(b"\x7fELF\x02\x01\x01\0")
                .expect_err("elf")
                .contains("not a WebAssembly binary")
        );
        assert!(check_component_header(b"\0as").is_err());
    }

    #[test]
    fn build_is_reproducible_and_well_formed() {
        let a = build(EMPTY_COMPONENT, "p.wasm").expect("build");
        let b = build(EMPTY_COMPONENT, "p.wasm").expect("build");
        assert_eq!(a.manifest_digest, b.manifest_digest);
        assert_eq!(a.manifest_digest, sha256_digest(&a.manifest));
        assert_eq!(a.config_digest, sha256_digest(&a.config));
        let layer = wasm_layer(&a.manifest).expect("our own manifest is accepted");
        assert_eq!(layer.digest, sha256_digest(EMPTY_COMPONENT));
        assert_eq!(layer.size, 8);
        let m: serde_json::Value = serde_json::from_slice(&a.manifest).expect("json");
        assert_eq!(m["config"]["mediaType"], WASM_CONFIG_MEDIA_TYPE);
        assert_eq!(m["layers"][0]["mediaType"], WASM_LAYER_MEDIA_TYPE);
        assert_eq!(m["layers"][0]["annotations"][TITLE], "p.wasm");
        let c: serde_json::Value = serde_json::from_slice(&a.config).expect("json");
        assert_eq!(c["os"], "wasip2");
        assert_eq!(c["layerDigests"][0], layer.digest);
        assert!(build(b"\0asm\x01\0\0\0", "m.wasm").is_err());
    }

    #[test]
    fn accepts_both_wasm_layer_media_types() {
        for mt in WASM_LAYER_MEDIA_TYPES {
            assert!(
                wasm_layer(&manifest(serde_json::json!([layer(mt)]))).is_ok(),
                "{mt}"
            );
        }
    }

    #[test]
    fn refuses_what_is_not_one_wasm_layer_naming_it() {
        let tar = "application/vnd.oci.image.layer.v1.tar+gzip";
        let cases = [
            (manifest(serde_json::json!([layer(tar)])), tar.to_string()),
            (
                manifest(serde_json::json!([layer("application/wasm"), layer(tar)])),
                format!("2 layers (application/wasm, {tar})"),
            ),
            (
                manifest(serde_json::json!([])),
                "without layers".to_string(),
            ),
            (
                serde_json::to_vec(&serde_json::json!({
                    "schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []}))
                .expect("json"),
                format!("an image index ({OCI_INDEX})"),
            ),
            (b"not json".to_vec(), "not an OCI manifest".to_string()),
        ];
        for (bytes, why) in cases {
            let err = wasm_layer(&bytes).expect_err("refused");
            assert!(err.contains(&why), "{err:?} should say {why:?}");
        }
        let bad_digest = manifest(serde_json::json!([
            {"mediaType": "application/wasm", "digest": "sha256:../../etc", "size": 1}
        ]));
        assert!(
            wasm_layer(&bad_digest)
                .expect_err("bad digest")
                .contains("digest")
        );
    }
}
