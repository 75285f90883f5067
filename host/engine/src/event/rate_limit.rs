//! When a failed key is tried again, as client-go's workqueue rate limiters decide it: the
//! key's own exponential backoff (or the server's `Retry-After` in its place), and no
//! sooner than a token bucket shared by all of a queue's keys allows, so many failing
//! objects together retry no faster than a set rate.
//!
//! The limiter keeps no per-key state: a key's failure count lives with the rest of the
//! key's state in the queue, and is passed in.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::QueueConfig;
use crate::error::Retry;

/// The retry delays of one queue.
pub(super) struct RateLimiter {
    /// First backoff.
    base: Duration,
    /// Longest backoff.
    max: Duration,
    /// The overall bucket.
    bucket: Bucket,
}

impl RateLimiter {
    /// The limiter for a queue with `config`'s retry settings.
    pub(super) fn new(config: &QueueConfig) -> Self {
        RateLimiter {
            base: config.retry_base,
            max: config.retry_max,
            bucket: Bucket::new(config.retry_rate, config.retry_burst),
        }
    }

    /// How long a key that has now failed `attempts` times in a row (at least 1) waits
    /// before its next try: the later of its own delay (the backoff, or the server's
    /// `Retry-After` when `retry` carries one) and a token from the overall bucket, which
    /// it takes.
    pub(super) fn when(&self, attempts: u32, retry: Retry) -> Duration {
        let own = match retry {
            Retry::After(after) => after,
            Retry::Backoff | Retry::Never => self.backoff(attempts),
        };
        own.max(self.bucket.reserve())
    }

    /// The key's own exponential backoff: `base` doubled per earlier failure, capped at
    /// `max`, with jitter.
    fn backoff(&self, attempts: u32) -> Duration {
        let exp = attempts.saturating_sub(1).min(20);
        let d = self.base.saturating_mul(1u32 << exp).min(self.max);
        // ±10% jitter so many failing objects do not retry in lockstep.
        let jitter = rand::random_range(0.9..1.1);
        d.mul_f64(jitter)
    }
}

/// A token bucket shared by every key of a queue, so many failing objects do not retry
/// faster than `rate` per second overall (the reservation semantics of Go's
/// `rate.Limiter`: a retry takes a token now and waits until the bucket had it).
struct Bucket {
    rate: f64,
    burst: f64,
    /// Tokens left and when they were counted.
    state: Mutex<(f64, Instant)>,
}

impl Bucket {
    fn new(rate: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Bucket {
            rate: if rate > 0.0 { rate } else { f64::INFINITY },
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// Take a token; how long to wait until it is there.
    fn reserve(&self) -> Duration {
        let mut st = kubewasm_core::sync::lock(&self.state);
        let now = Instant::now();
        let (tokens, last) = *st;
        let refilled =
            (tokens + now.duration_since(last).as_secs_f64() * self.rate).min(self.burst);
        let left = refilled - 1.0;
        *st = (left, now);
        if left >= 0.0 || !self.rate.is_finite() {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-left / self.rate)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use crate::event::testing::api_error;
    use kubewasm_runtime::CallError;

    #[test]
    fn errors_are_classified_by_type() {
        assert_eq!(
            api_error(429, Some(2)).retry(),
            Retry::After(Duration::from_secs(2))
        );
        assert_eq!(
            api_error(503, Some(5)).retry(),
            Retry::After(Duration::from_secs(5))
        );
        assert_eq!(api_error(500, None).retry(), Retry::Backoff);
        assert_eq!(api_error(409, None).retry(), Retry::Backoff);
        for status in [400, 403, 404, 415, 422] {
            assert_eq!(api_error(status, None).retry(), Retry::Never, "{status}");
        }
        let conflict = Error::Api {
            verb: "apply",
            target: "ConfigMap a/shared".into(),
            status: 409,
            reason: "Conflict".into(),
            message: "conflict with kubewasm-other".into(),
            retry_after: None,
            field_conflict: true,
            uid_rejected: false,
        };
        assert_eq!(conflict.retry(), Retry::Never);
        let trap = Error::Call {
            plugin: "p".into(),
            kind: CallError::Trap("boom".into()),
        };
        assert_eq!(trap.retry(), Retry::Backoff);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let c = QueueConfig {
            concurrency: 1,
            retry_base: Duration::from_millis(100),
            retry_max: Duration::from_secs(1),
            ..QueueConfig::default()
        };
        let limiter = RateLimiter::new(&c);
        let d1 = limiter.backoff(1);
        let d3 = limiter.backoff(3);
        let d30 = limiter.backoff(30);
        assert!(d1 >= Duration::from_millis(90) && d1 <= Duration::from_millis(110));
        assert!(d3 >= Duration::from_millis(360) && d3 <= Duration::from_millis(440));
        assert!(d30 <= Duration::from_millis(1100));
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_replaces_the_backoff_and_the_bucket_delays_both() {
        let limiter = RateLimiter::new(&QueueConfig {
            retry_base: Duration::from_millis(100),
            retry_rate: 2.0,
            retry_burst: 1,
            ..QueueConfig::default()
        });
        // The burst's one token: the key's own delay.
        assert_eq!(
            limiter.when(1, Retry::After(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        // The bucket is empty: the next token comes in 1/rate s, later than the backoff.
        assert_eq!(limiter.when(1, Retry::Backoff), Duration::from_millis(500));
        // A later Retry-After still wins over the bucket.
        assert_eq!(
            limiter.when(1, Retry::After(Duration::from_secs(5))),
            Duration::from_secs(5)
        );
    }
}
