//! The bytes of parsed lines in flight between the reading thread and the judging one: the
//! reader waits while they pass the budget (one line is always let through), so that large
//! samples are not piled up ahead of the judging.

use std::sync::{Condvar, Mutex};

pub(super) struct Budget {
    state: Mutex<State>,
    changed: Condvar,
    cap: u64,
}

struct State {
    used: u64,
    /// The judging side has gone: the reader stops waiting.
    closed: bool,
}

/// Closes the budget when dropped (the judging side is done, or has panicked).
pub(super) struct Closer<'a>(&'a Budget);

impl Drop for Closer<'_> {
    fn drop(&mut self) {
        self.0.lock().closed = true;
        self.0.changed.notify_all();
    }
}

impl Budget {
    pub(crate) fn new(cap: u64) -> Self {
        Budget {
            state: Mutex::new(State {
                used: 0,
                closed: false,
            }),
            changed: Condvar::new(),
            cap,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes `bytes`, waiting while others are in flight and these would pass the cap;
    /// `false` once closed.
    pub(crate) fn take(&self, bytes: u64) -> bool {
        let mut state = self.lock();
        while !state.closed && state.used > 0 && state.used + bytes > self.cap {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.used += bytes;
        !state.closed
    }

    /// Gives back `bytes` taken.
    pub(crate) fn give(&self, bytes: u64) {
        let mut state = self.lock();
        state.used = state.used.saturating_sub(bytes);
        drop(state);
        self.changed.notify_all();
    }

    pub(crate) fn closer(&self) -> Closer<'_> {
        Closer(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reader_waits_past_the_cap_and_stops_once_closed() {
        let budget = Budget::new(100);
        assert!(budget.take(60));
        std::thread::scope(|scope| {
            let waiting = scope.spawn(|| budget.take(60));
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(!waiting.is_finished(), "60 + 60 is past the cap");
            budget.give(60);
            assert!(waiting.join().expect("join"));
        });
        // One line larger than the cap goes through alone.
        budget.give(60);
        assert!(budget.take(500));
        let closer = budget.closer();
        drop(closer);
        assert!(!budget.take(1));
    }
}
