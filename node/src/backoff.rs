//! One exponential backoff for every retry loop of the node: a delay that
//! doubles from a first value up to a cap, and starts over after a success.
//! A plain value: the caller sleeps (and decides when to give up).

use std::time::Duration;

/// Delays doubling from `first` up to `max`.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// Delays from `first`, doubling up to `max` (`max` below `first` is `first`).
    pub const fn new(first: Duration, max: Duration) -> Self {
        let max = if max.as_nanos() < first.as_nanos() { first } else { max };
        Self { first, max, next: first }
    }

    /// The delay to wait now; the following one is twice as long, up to the cap.
    pub fn next_delay(&mut self) -> Duration {
        let now = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        now
    }

    /// True once the delays reached the cap (a caller that gives up then).
    pub fn at_cap(&self) -> bool {
        self.next >= self.max
    }

    /// After a success: the next delay is the first again.
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_and_start_over_after_a_reset() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(200), ms(1_000));
        let seen: Vec<_> = (0..5).map(|_| b.next_delay()).collect();
        assert_eq!(seen, [ms(200), ms(400), ms(800), ms(1_000), ms(1_000)]);
        assert!(b.at_cap());
        b.reset();
        assert!(!b.at_cap());
        assert_eq!(b.next_delay(), ms(200));
        // A cap below the first delay is the first delay.
        let mut flat = Backoff::new(ms(500), ms(100));
        assert_eq!((flat.next_delay(), flat.next_delay()), (ms(500), ms(500)));
    }
}
