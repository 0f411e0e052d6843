//! Child processes that never outlive their test, and waiting on a condition.

use std::ops::{Deref, DerefMut};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A child process killed and reaped on drop (a test that fails leaves none behind), unless
/// the test reaped it first. Derefs to the [`Child`].
pub struct Running(pub Child);

impl Running {
    /// Spawns `command`; panics naming the program if it cannot start.
    pub fn spawn(command: &mut Command) -> Running {
        match command.spawn() {
            Ok(child) => Running(child),
            Err(e) => panic!("cannot start {:?}: {e}", command.get_program()),
        }
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// The signal it died of, waiting up to `timeout`; `None` while it is still alive then
    /// (or if it exited rather than being killed).
    pub fn died_of(&mut self, timeout: Duration) -> Option<i32> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(status) = self.0.try_wait().expect("try_wait on a child of the test") {
                return status.signal();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Deref for Running {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Polls `cond` every 20 ms until it holds; panics naming `what` once `limit` has passed.
pub fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
