//! Why a plugin is called: the event types of the WIT contract.

/// The kind of change an event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// The object appeared (or this watch saw it for the first time).
    Added,
    /// The object changed; the event carries the previous state too.
    Modified,
    /// The object is gone; the event carries its last known state.
    Deleted,
    /// Re-delivery of the current state; nothing necessarily changed.
    Resync,
}

impl EventType {
    /// Lowercase name, as in logs, metrics and test cases.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "added",
            EventType::Modified => "modified",
            EventType::Deleted => "deleted",
            EventType::Resync => "resync",
        }
    }

    /// Parse the lowercase name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "added" => EventType::Added,
            "modified" => EventType::Modified,
            "deleted" => EventType::Deleted,
            "resync" => EventType::Resync,
            _ => return None,
        })
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
