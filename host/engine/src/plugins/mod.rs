//! The plugins at work: the immutable environment swapped whole (`environment`), the
//! reload that turns the current environment and what changed into the next one
//! (`reload`), loads and pulls off the reload path (`compiles`), Plugin objects and their
//! status (`objects`), the plugin directory's watch (`dir_watch`), and the replay of cached
//! objects to new plugins, new versions and a new leader (`replay`), and new versions that
//! wait for their caches before they serve (`staging`).

pub(crate) mod compiles;
pub(crate) mod dir_watch;
pub(crate) mod environment;
pub(crate) mod objects;
pub(crate) mod reload;
pub(crate) mod replay;
pub(crate) mod staging;
