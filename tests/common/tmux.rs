//! Driving the real binary in a real pseudo-terminal under tmux, as a user would.

use super::Scratch;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// How long a wait for what must come gives it: long enough that only a hang reaches it on a
/// loaded machine (what a test asserts is what happened, not how fast).
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A private tmux server with one pane running a shell script, torn down on drop, with a
/// scratch directory of its own (the script's).
pub struct Pane {
    socket: String,
    scratch: Scratch,
}

fn tmux(socket: &str, args: &[&str]) -> Output {
    Command::new("tmux")
        .arg("-L")
        .arg(socket)
        .args(args)
        .output()
        .expect("tmux must be installed to run the terminal tests (apt-get install tmux)")
}

impl Pane {
    /// Starts `command` in a `width`x`height` pane. After it exits the pane prints its exit
    /// status and the terminal's mode (`stty -a`), then waits, so both can be read.
    pub fn start(name: &str, command: &str, width: u16, height: u16) -> Pane {
        let scratch = Scratch::new(&format!("tmux-{name}"));
        // The server's name is the directory's, as unique.
        let socket = scratch
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .expect("a scratch dir has a name");
        let script = scratch.path("run.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n{command}\necho \"EXIT=$?\"\nstty -a | tr ' ' '\\n' | grep -E '^-?(icanon|echo)$' | tr '\\n' ' '\necho ' STTY-END'\nsleep 600\n"
            ),
        )
        .expect("script");
        let out = tmux(
            &socket,
            &[
                "new-session",
                "-d",
                "-x",
                &width.to_string(),
                "-y",
                &height.to_string(),
                "sh",
                script.to_str().expect("utf-8 path"),
            ],
        );
        assert!(
            out.status.success(),
            "tmux: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Pane { socket, scratch }
    }

    /// The pane's own directory, where its script is.
    pub fn dir(&self) -> &Path {
        &self.scratch.dir
    }

    pub fn capture(&self) -> String {
        String::from_utf8_lossy(&tmux(&self.socket, &["capture-pane", "-p"]).stdout).into_owned()
    }

    /// A tmux format of the pane (`#{alternate_on}`, `#{cursor_flag}`, `#{pane_tty}`...).
    pub fn format(&self, format: &str) -> String {
        let out = tmux(&self.socket, &["display-message", "-p", format]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys"];
        args.extend_from_slice(keys);
        tmux(&self.socket, &args);
    }

    pub fn resize(&self, width: u16, height: u16) {
        tmux(
            &self.socket,
            &[
                "resize-window",
                "-x",
                &width.to_string(),
                "-y",
                &height.to_string(),
            ],
        );
    }

    /// Waits until the screen shows every one of `needles`; returns the screen.
    pub fn wait_for(&self, needles: &[&str], timeout: Duration) -> Result<String, String> {
        let start = Instant::now();
        loop {
            let screen = self.capture();
            if needles.iter().all(|n| screen.contains(n)) {
                return Ok(screen);
            }
            if start.elapsed() > timeout {
                return Err(screen);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Waits until the screen shows every one of `needles` ([`PATIENCE`] at most); returns
    /// the screen, or panics with `what` and the screen.
    pub fn must_show(&self, needles: &[&str], what: &str) -> String {
        self.wait_for(needles, PATIENCE)
            .unwrap_or_else(|s| panic!("{what}:\n{s}"))
    }

    /// The PID of the program the pane's shell is running.
    pub fn program_pid(&self) -> u32 {
        let shell = String::from_utf8_lossy(
            &tmux(&self.socket, &["display-message", "-p", "#{pane_pid}"]).stdout,
        )
        .trim()
        .to_string();
        let start = Instant::now();
        loop {
            let out = Command::new("pgrep")
                .args(["-P", &shell])
                .output()
                .expect("pgrep");
            let text = String::from_utf8_lossy(&out.stdout);
            if let Some(pid) = text.lines().next().and_then(|l| l.trim().parse().ok()) {
                return pid;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "no child of the pane shell"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// After the program exited: its exit line and whether the terminal is in cooked mode
    /// (canonical input and echo both on).
    pub fn wait_exit(&self, timeout: Duration) -> Result<(String, bool), String> {
        let screen = self.wait_for(&["EXIT=", "STTY-END"], timeout)?;
        let exit = screen
            .lines()
            .find(|l| l.contains("EXIT="))
            .unwrap_or_default()
            .trim()
            .to_string();
        let modes = screen
            .lines()
            .find(|l| l.contains("STTY-END"))
            .unwrap_or_default()
            .to_string();
        let cooked = modes.split_whitespace().any(|m| m == "icanon")
            && modes.split_whitespace().any(|m| m == "echo");
        Ok((exit, cooked))
    }

    /// Hangs up every pane's terminal, as a closed window or a lost SSH connection does:
    /// the server, which holds their other sides, is killed.
    pub fn hang_up(&self) {
        tmux(&self.socket, &["kill-server"]);
    }

    /// `q`, then the program must have exited with status 0 ([`PATIENCE`] at most), leaving
    /// the terminal in cooked mode.
    pub fn quit(&self) {
        self.keys(&["q"]);
        let (exit, cooked) = self
            .wait_exit(PATIENCE)
            .unwrap_or_else(|s| panic!("did not quit:\n{s}"));
        assert_eq!(exit, "EXIT=0", "{}", self.capture());
        assert!(cooked, "terminal left raw:\n{}", self.capture());
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let socket_path = tmux(&self.socket, &["display-message", "-p", "#{socket_path}"]);
        tmux(&self.socket, &["kill-server"]);
        let path = String::from_utf8_lossy(&socket_path.stdout)
            .trim()
            .to_string();
        if !path.is_empty() {
            let _ = std::fs::remove_file(path);
        }
    }
}
