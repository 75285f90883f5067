//! Quarantine: a plugin whose calls keep failing (traps, deadlines, memory cap, limits) stops
//! receiving events for a cooldown, so it cannot burn CPU or flood the logs. A new version of
//! its file starts healthy; after the cooldown it gets one call on probation.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// When to quarantine and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuarantinePolicy {
    /// Consecutive failed calls that quarantine a plugin (0 disables quarantine).
    pub threshold: u32,
    /// How long a quarantine lasts.
    pub cooldown: Duration,
}

impl Default for QuarantinePolicy {
    fn default() -> Self {
        QuarantinePolicy {
            threshold: 5,
            cooldown: Duration::from_secs(300),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    failures: u32,
    until: Option<Instant>,
    reason: String,
}

/// The health of one plugin version.
#[derive(Debug)]
pub(crate) struct Health {
    policy: QuarantinePolicy,
    state: Mutex<State>,
}

/// A refusal to call a quarantined plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Quarantined {
    /// The failure that tipped it over.
    pub(crate) reason: String,
    /// Time left.
    pub(crate) remaining: Duration,
}

impl Health {
    /// Healthy, under `policy`.
    pub(crate) fn new(policy: QuarantinePolicy) -> Self {
        Health {
            policy,
            state: Mutex::new(State::default()),
        }
    }

    /// Ok when the plugin may be called now.
    pub(crate) fn check(&self) -> Result<(), Quarantined> {
        let st = kubewasm_core::sync::lock(&self.state);
        match st.until {
            Some(until) if until > Instant::now() => Err(Quarantined {
                reason: st.reason.clone(),
                remaining: until - Instant::now(),
            }),
            _ => Ok(()),
        }
    }

    /// A call completed (whatever the plugin answered).
    pub(crate) fn success(&self) {
        {
            let mut st = kubewasm_core::sync::lock(&self.state);
            *st = State::default();
        }
    }

    /// A call failed in the sandbox. Returns true when this failure starts a quarantine.
    pub(crate) fn failure(&self, reason: &str) -> bool {
        if self.policy.threshold == 0 {
            return false;
        }
        let mut st = kubewasm_core::sync::lock(&self.state);
        st.failures += 1;
        if st.failures >= self.policy.threshold {
            st.until = Some(Instant::now() + self.policy.cooldown);
            st.reason = reason.to_string();
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quarantines_after_consecutive_failures_and_recovers_after_cooldown() {
        let h = Health::new(QuarantinePolicy {
            threshold: 3,
            cooldown: Duration::from_millis(50),
        });
        assert!(!h.failure("trap"));
        h.success();
        assert!(!h.failure("trap"));
        assert!(!h.failure("trap"));
        assert!(h.check().is_ok());
        assert!(h.failure("deadline"));
        let q = h.check().unwrap_err();
        assert_eq!(q.reason, "deadline");
        std::thread::sleep(Duration::from_millis(60));
        // Probation: one call allowed; failing again re-quarantines at once.
        assert!(h.check().is_ok());
        assert!(h.failure("trap"));
        assert!(h.check().is_err(), "still quarantined");
    }

    #[test]
    fn threshold_zero_disables() {
        let h = Health::new(QuarantinePolicy {
            threshold: 0,
            cooldown: Duration::from_secs(1),
        });
        for _ in 0..10 {
            assert!(!h.failure("trap"));
        }
        assert!(h.check().is_ok());
    }
}
