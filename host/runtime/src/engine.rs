//! The shared wasmtime engine: async, epoch-interruptible, with WASI (deny-all) and the
//! kubewasm host interface added to one linker.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Config, Engine};

use crate::bindings::Plugin;
use crate::capability;
use crate::error::{EngineError, Error};
use crate::state::PluginState;

/// How often the epoch advances; deadlines are checked (and plugins yield to the async
/// runtime) at this granularity.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(5);

/// The wasmtime configuration of every engine that compiles or runs plugins (the compile
/// worker builds its engine from it too, so its output loads here).
pub(crate) fn config() -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.wasm_component_model(true);
    config
}

/// The engine and linker every plugin is compiled and linked with.
#[derive(Clone)]
pub struct PluginEngine {
    pub(crate) engine: Engine,
    pub(crate) linker: Arc<Linker<PluginState>>,
    _ticker: Arc<Ticker>,
}

struct Ticker {
    stop: Arc<AtomicBool>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl PluginEngine {
    /// Build the engine, start its epoch ticker and link the host capabilities.
    pub fn new() -> Result<Self, Error> {
        let engine = Engine::new(&config()).map_err(EngineError::Config)?;

        let mut linker = Linker::<PluginState>::new(&engine);
        capability::wasi::link(&mut linker).map_err(|source| EngineError::Link {
            what: "WASI",
            source,
        })?;
        Plugin::add_to_linker::<PluginState, HasSelf<PluginState>>(&mut linker, |s| s).map_err(
            |source| EngineError::Link {
                what: "host interface",
                source,
            },
        )?;
        // `log` again, taking the message without copying it whole.
        capability::log::link(&mut linker).map_err(|source| EngineError::Link {
            what: "host.log",
            source,
        })?;

        let stop = Arc::new(AtomicBool::new(false));
        let weak = engine.weak();
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("kubewasm-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .map_err(EngineError::Ticker)?;

        Ok(PluginEngine {
            engine,
            linker: Arc::new(linker),
            _ticker: Arc::new(Ticker { stop }),
        })
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}
