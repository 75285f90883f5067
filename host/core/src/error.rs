//! The crate's error type: each concept's own error, one enum to carry any of them.

/// Any error of the core model.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A resource argument or apiVersion did not parse.
    #[error(transparent)]
    Resource(#[from] crate::resource::ResourceError),
    /// A selector did not parse.
    #[error(transparent)]
    Selector(#[from] crate::selector::SelectorError),
    /// A manifest was rejected.
    #[error(transparent)]
    Manifest(#[from] crate::manifest::ManifestError),
    /// An intent was invalid.
    #[error(transparent)]
    Intent(#[from] crate::intent::IntentError),
    /// An access was refused.
    #[error(transparent)]
    Grant(#[from] crate::grant::GrantError),
    /// A call's intents were rejected.
    #[error(transparent)]
    Rejected(#[from] crate::admit::Rejection),
}
