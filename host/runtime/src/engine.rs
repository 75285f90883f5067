//! The shared wasmtime engine: async, epoch-interruptible, with WASI (deny-all) and the
//! kubewasm host interface added to one linker.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Config, Engine};

use crate::bindings::{Plugin, v01};
use crate::budget::CallBudget;
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
    // Address space, stated rather than left to wasmtime's defaults (which these equal on
    // 64-bit hosts): compiled code depends on them, so the worker and the host must agree,
    // and every linear memory reserves them in the host's address space whether or not it
    // uses them. 4 GiB covers a 32-bit memory's whole index space, so loads and stores
    // need no bounds checks; the 32 MiB guard covers their immediate offsets. With at most
    // `MAX_MEMORIES` memories per instance (`crate::state`) an instance reserves at most
    // ~33 GiB of the 128 TiB a process has: thousands of live instances fit. Memories that
    // outgrow the reservation (memory64, or a cap above 4 GiB) move, reserving 2 GiB ahead
    // so that they do not move again at every growth: address space only, and only for
    // memories an operator allowed past 4 GiB. (Equal to the defaults, so compiled code
    // cached before these lines were written stays valid.)
    config.memory_reservation(MEMORY_RESERVATION);
    config.memory_guard_size(MEMORY_GUARD);
    config.memory_reservation_for_growth(MEMORY_GROWTH_RESERVATION);
    config
}

/// Address space reserved for each linear memory (4 GiB; see [`config`]).
pub(crate) const MEMORY_RESERVATION: u64 = 4 << 30;
/// Unmapped guard after each linear memory (32 MiB).
pub(crate) const MEMORY_GUARD: u64 = 32 << 20;
/// Room reserved ahead of a memory that had to move (2 GiB).
pub(crate) const MEMORY_GROWTH_RESERVATION: u64 = 2 << 30;

/// The engine and linker every plugin is compiled and linked with.
#[derive(Clone)]
pub struct PluginEngine {
    pub(crate) engine: Engine,
    pub(crate) linker: Arc<Linker<PluginState>>,
    /// The host-wide memory budget every plugin's calls draw from.
    pub(crate) budget: CallBudget,
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
        // Components built for 0.1.0 import its host interface: the same functions.
        v01::Plugin::add_to_linker::<PluginState, HasSelf<PluginState>>(&mut linker, |s| s)
            .map_err(|source| EngineError::Link {
                what: "host interface 0.1.0",
                source,
            })?;
        // `log`, `get` and `list` again, taking their arguments without copying them whole.
        capability::log::link(&mut linker).map_err(|source| EngineError::Link {
            what: "host.log",
            source,
        })?;
        capability::cluster::link(&mut linker).map_err(|source| EngineError::Link {
            what: "host.get and host.list",
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
            budget: CallBudget::unbounded(),
            _ticker: Arc::new(Ticker { stop }),
        })
    }

    /// This engine with every call of the plugins loaded on it drawing from `budget`
    /// (see [`crate::budget`]); unbounded by default.
    pub fn with_call_budget(mut self, budget: CallBudget) -> Self {
        self.budget = budget;
        self
    }

    /// The call budget plugins loaded on this engine draw from.
    pub fn call_budget(&self) -> &CallBudget {
        &self.budget
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}
