//! Child processes that never outlive their test, and waiting on a condition.

use std::io::Read;
use std::ops::{Deref, DerefMut};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// A child process killed and reaped on drop (a test that fails leaves none behind), unless
/// the test reaped it first. Derefs to the [`Child`].
pub struct Running(pub Child);

impl Running {
    /// Spawns `command`; panics naming the program if it cannot start. SIGINT and SIGQUIT
    /// are at their default action in the child: a test run started in the background
    /// (`cmd &` in a script, nohup) has them ignored, and its children would inherit that.
    pub fn spawn(command: &mut Command) -> Running {
        // SAFETY: between fork and exec the closure makes only signal(2) calls, which are
        // async-signal-safe, and touches no memory of the parent's.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                libc::signal(libc::SIGQUIT, libc::SIG_DFL);
                Ok(())
            });
        }
        match command.spawn() {
            Ok(child) => Running(child),
            Err(e) => panic!("cannot start {:?}: {e}", command.get_program()),
        }
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// [`Child::wait_with_output`], kept here so that the child is still killed if the test
    /// fails before it ends: stdin closed, stdout and stderr read to their end, then reaped.
    pub fn wait_with_output(mut self) -> std::io::Result<Output> {
        drop(self.0.stdin.take());
        let stdout = self.0.stdout.take().map(|mut pipe| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                pipe.read_to_end(&mut bytes).map(|_| bytes)
            })
        });
        let mut stderr = Vec::new();
        if let Some(mut pipe) = self.0.stderr.take() {
            pipe.read_to_end(&mut stderr)?;
        }
        let stdout = match stdout {
            Some(reader) => reader
                .join()
                .map_err(|_| std::io::Error::other("the stdout reader panicked"))??,
            None => Vec::new(),
        };
        let status = self.0.wait()?;
        Ok(Output {
            status,
            stdout,
            stderr,
        })
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
