//! Host-side bindings generated from the WIT: `wit/plugin.wit` (`kubewasm:plugin@0.2.0`,
//! the current version) and the frozen copy of `kubewasm:plugin@0.1.0`
//! (`host/runtime/wit/v0.1/plugin.wit`), so components built before projections keep
//! loading. A 0.1.0 component's manifest converts to the current one with no fields
//! (whole objects), and its intents are the same records under another package.
#![allow(missing_docs)]

/// `kubewasm:plugin@0.2.0`.
pub(crate) mod current {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "kubewasm:plugin/plugin",
        exports: { default: async },
    });
}

/// `kubewasm:plugin@0.1.0`, frozen.
pub(crate) mod v01 {
    wasmtime::component::bindgen!({
        path: "wit/v0.1",
        world: "kubewasm:plugin/plugin",
        exports: { default: async },
    });
}

pub(crate) use self::current::Plugin;
pub(crate) use self::current::kubewasm::plugin::types;

/// The versions of the host interface a component may import, by the name it imports
/// (the functions are the same in every version).
pub(crate) const HOST_INTERFACES: [&str; 2] =
    ["kubewasm:plugin/host@0.2.0", "kubewasm:plugin/host@0.1.0"];

/// A component's bindings, in the version of the WIT it exports.
pub(crate) enum Bindings {
    Current(current::Plugin),
    V01(v01::Plugin),
}

/// A component linked against the host, in the version of the WIT it exports.
pub(crate) enum Pre<T: 'static> {
    Current(current::PluginPre<T>),
    V01(v01::PluginPre<T>),
}

impl<T: 'static> Clone for Pre<T> {
    fn clone(&self) -> Self {
        match self {
            Pre::Current(p) => Pre::Current(p.clone()),
            Pre::V01(p) => Pre::V01(p.clone()),
        }
    }
}

impl<T: Send + 'static> Pre<T> {
    /// The bindings of the version the component exports: the current one, else 0.1.0;
    /// neither: the current version's error (what a plugin should be rebuilt against).
    pub(crate) fn new(pre: wasmtime::component::InstancePre<T>) -> wasmtime::Result<Self> {
        match current::PluginPre::new(pre.clone()) {
            Ok(p) => Ok(Pre::Current(p)),
            Err(e) => match v01::PluginPre::new(pre) {
                Ok(p) => Ok(Pre::V01(p)),
                Err(_) => Err(e),
            },
        }
    }

    /// Instantiate in `store`.
    pub(crate) async fn instantiate_async(
        &self,
        store: &mut wasmtime::Store<T>,
    ) -> wasmtime::Result<Bindings> {
        Ok(match self {
            Pre::Current(p) => Bindings::Current(p.instantiate_async(store).await?),
            Pre::V01(p) => Bindings::V01(p.instantiate_async(store).await?),
        })
    }

    /// The WIT package version the component was built for.
    pub(crate) fn version(&self) -> &'static str {
        match self {
            Pre::Current(_) => "0.2.0",
            Pre::V01(_) => "0.1.0",
        }
    }
}
