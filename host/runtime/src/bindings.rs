//! Host-side bindings generated from `wit/plugin.wit`.
#![allow(missing_docs)]

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "kubewasm:plugin/plugin",
    exports: { default: async },
});

pub(crate) use self::kubewasm::plugin::types;
