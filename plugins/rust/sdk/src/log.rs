//! Logging through the host: lines go to the host's log, tagged with the plugin and the
//! object being handled.
//!
//! ```
//! use kubewasm_sdk::log;
//! log::info!("provisioning {}", "blog");
//! log::warn!("spec.database.members is {}, using 1", 0);
//! ```
//!
//! Natively (in `cargo test`), lines go to stderr and to
//! [`testing::take_logs`](crate::testing::take_logs); a native benchmark silences them
//! with [`testing::silence_logs`](crate::testing::silence_logs).

use serde::{Deserialize, Serialize};

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Very detailed.
    Trace,
    /// Detailed.
    Debug,
    /// Normal operation.
    Info,
    /// Something looks wrong.
    Warn,
    /// Something failed.
    Error,
}

/// Writes one line to the host's log.
pub fn log(level: Level, message: &str) {
    imp::log(level, message);
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::Level;
    use crate::bindings::kubewasm::plugin::{host, types::LogLevel};

    pub(super) fn log(level: Level, message: &str) {
        let level = match level {
            Level::Trace => LogLevel::Trace,
            Level::Debug => LogLevel::Debug,
            Level::Info => LogLevel::Info,
            Level::Warn => LogLevel::Warn,
            Level::Error => LogLevel::Error,
        };
        host::log(level, message);
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::Level;

    pub(super) fn log(level: Level, message: &str) {
        crate::testing::record_log(level, message);
    }
}

#[doc(hidden)]
#[macro_export]
macro_rules! __kubewasm_log {
    ($level:expr, $($arg:tt)+) => {
        $crate::log::log($level, &::std::format!($($arg)+))
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __kubewasm_trace {
    ($($arg:tt)+) => { $crate::__kubewasm_log!($crate::log::Level::Trace, $($arg)+) };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __kubewasm_debug {
    ($($arg:tt)+) => { $crate::__kubewasm_log!($crate::log::Level::Debug, $($arg)+) };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __kubewasm_info {
    ($($arg:tt)+) => { $crate::__kubewasm_log!($crate::log::Level::Info, $($arg)+) };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __kubewasm_warn {
    ($($arg:tt)+) => { $crate::__kubewasm_log!($crate::log::Level::Warn, $($arg)+) };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __kubewasm_error {
    ($($arg:tt)+) => { $crate::__kubewasm_log!($crate::log::Level::Error, $($arg)+) };
}

/// `log::trace!("fmt", args..)`: a trace line.
#[doc(inline)]
pub use crate::__kubewasm_trace as trace;

/// `log::debug!("fmt", args..)`: a debug line.
#[doc(inline)]
pub use crate::__kubewasm_debug as debug;

/// `log::info!("fmt", args..)`: an info line.
#[doc(inline)]
pub use crate::__kubewasm_info as info;

/// `log::warn!("fmt", args..)`: a warning.
#[doc(inline)]
pub use crate::__kubewasm_warn as warn;

/// `log::error!("fmt", args..)`: an error line.
#[doc(inline)]
pub use crate::__kubewasm_error as error;

#[cfg(test)]
mod tests {
    #[test]
    fn macros_format_and_record() {
        crate::testing::take_logs();
        crate::log::info!("hello {}", 42);
        crate::log::error!("bad");
        assert_eq!(
            crate::testing::take_logs(),
            vec![
                (super::Level::Info, "hello 42".to_owned()),
                (super::Level::Error, "bad".to_owned())
            ]
        );
    }
}
