//! Owning the terminal: raw mode and the alternate screen on entry, and one idempotent
//! restore used by every exit path (normal quit, `Drop`, panic, SIGTERM, SIGHUP, errors).

use crossterm::cursor::{Hide, Show};
use crossterm::execute;
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use std::io::{self, Stdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

static ACTIVE: AtomicBool = AtomicBool::new(false);
static PANIC_HOOK: Once = Once::new();

/// Puts the terminal back as it was. Safe to call any number of times, from any path; errors
/// are ignored because the terminal may already be gone (an SSH session that dropped).
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = disable_raw_mode();
        let _ = execute!(io::stdout(), LeaveAlternateScreen, Show);
    }
}

/// Restores the terminal before the previous panic hook prints, so the message is readable.
/// Installed once, chaining whatever hook was there.
fn install_panic_hook() {
    PANIC_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // A panic on the sampling thread is caught there and shown on the status line;
            // the screen stays up, so do not restore it nor print over it.
            if std::thread::current().name() == Some(crate::tui::COLLECTOR_THREAD)
                && ACTIVE.load(Ordering::SeqCst)
            {
                return;
            }
            restore();
            previous(info);
        }));
    });
}

/// Restores the terminal when dropped, whatever way the scope ends.
pub struct Guard {
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

/// Takes the terminal: raw mode, alternate screen, hidden cursor.
pub fn enter() -> io::Result<Guard> {
    install_panic_hook();
    enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    if let Err(e) = execute!(io::stdout(), EnterAlternateScreen, Hide) {
        restore();
        return Err(e);
    }
    match Terminal::new(CrosstermBackend::new(io::stdout())) {
        Ok(terminal) => Ok(Guard { terminal }),
        Err(e) => {
            restore();
            Err(e)
        }
    }
}
