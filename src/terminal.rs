//! Owning the terminal: raw mode, the alternate screen and the mouse on entry, and one idempotent
//! restore used by every exit path (normal quit, `Drop`, panic, errors, and every signal that
//! ends the process), and by a stop (SIGTSTP, Ctrl-Z), undone on SIGCONT.
//!
//! Signals that ask the process to end are heard by the event loop, which restores the
//! terminal in ordinary code and then dies of the same signal ([`die_of`]). Faults (SIGSEGV,
//! SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS) can strike inside NVML's C library with
//! the loop unable to run: their handler restores the terminal with async-signal-safe calls
//! only (`tcsetattr`, `write`), then lets the signal take its course.

// The changed cells written to the terminal in few bytes.
mod lean_backend;
// The event loop's timer, which wakes it at its moment only.
mod alarm;
// Which cells of a frame changed: ratatui's diff, for less.
mod diff;
// A terminal hung up ends the monitor as SIGHUP does, told or not.
mod hangup;

pub(crate) use alarm::Alarm;
pub(crate) use hangup::is_hangup;

use crossterm::cursor::{Hide, Show};
use crossterm::execute;
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, Clear, ClearType, EnterAlternateScreen, LeaveAlternateScreen,
};
use lean_backend::LeanBackend;
use ratatui::backend::Backend;
use ratatui::buffer::{Buffer, Cell};
use ratatui::{Frame, Terminal};
use std::io::{self, Stdout};
use std::ops::Range;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Once, OnceLock};

/// Name of the sampling thread; the panic hook leaves the terminal alone for it.
pub(crate) const COLLECTOR_THREAD: &str = "strata-collector";

static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Whether the monitor captures the mouse (not `--no-mouse`): what a restore turns off and a
/// re-entry turns on again.
static MOUSE: AtomicBool = AtomicBool::new(false);
static PANIC_HOOK: Once = Once::new();
static FAULT_HANDLERS: Once = Once::new();

/// The terminal's own mode, read before raw mode was first set: what a fault handler puts
/// back (it cannot take crossterm's lock), on the descriptor crossterm sets modes on.
static COOKED: OnceLock<(c_int, libc::termios)> = OnceLock::new();

/// Undoes what [`enter`] writes: the pen plain (a frame leaves its last style set), back to
/// the primary screen, cursor shown. Nothing else is enabled but the mouse ([`MOUSE_OFF`],
/// written first where it was captured): no keyboard protocol, no bracketed paste, so
/// nothing else is undone: popping modes strata never pushed would change the shell's.
const LEAVE: &[u8] = b"\x1b[0m\x1b[?1049l\x1b[?25h";

/// Reports of the mouse's presses, releases and wheel (1000), in SGR's encoding (1006), which
/// holds any column. crossterm's `EnableMouseCapture` asks for every motion as well (1002,
/// 1003): a report for each cell the pointer crosses, which strata never reads and which
/// costs bytes over SSH.
const MOUSE_ON: &str = "\x1b[?1000h\x1b[?1006h";
/// Undoes [`MOUSE_ON`], in the reverse order.
const MOUSE_OFF: &str = "\x1b[?1006l\x1b[?1000l";

/// Every style off: what the screen's last frame left set is not the shell's.
const PLAIN_PEN: &str = "\x1b[0m";

/// A mode of the terminal set or reset by its escape sequence.
struct Mode(&'static str);

impl crossterm::Command for Mode {
    fn write_ansi(&self, f: &mut impl std::fmt::Write) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// The mouse captured, where it is wanted.
fn capture_mouse() -> io::Result<()> {
    if MOUSE.load(Ordering::SeqCst) {
        execute!(io::stdout(), Mode(MOUSE_ON))?;
    }
    Ok(())
}

/// Puts the terminal back as it was. Safe to call any number of times, from any path; errors
/// are ignored because the terminal may already be gone (an SSH session that dropped).
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = disable_raw_mode();
        if MOUSE.load(Ordering::SeqCst) {
            let _ = execute!(io::stdout(), Mode(MOUSE_OFF));
        }
        let _ = execute!(io::stdout(), Mode(PLAIN_PEN), LeaveAlternateScreen, Show);
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
            if std::thread::current().name() == Some(COLLECTOR_THREAD)
                && ACTIVE.load(Ordering::SeqCst)
            {
                return;
            }
            restore();
            previous(info);
        }));
    });
}

/// Restores the terminal when dropped, whatever way the scope ends; draws on it meanwhile.
pub(crate) struct Guard {
    terminal: Terminal<LeanBackend<Stdout>>,
    /// What the screen shows: the last frame written, or blanks after a clear. ratatui's
    /// `Terminal` keeps its own, but diffs it only in its `flush`, which [`Guard::draw`]
    /// does not call.
    shown: Buffer,
    /// Whether the screen was blanked (`shown` with it) since the last frame was drawn.
    wiped: bool,
}

/// Writes to `backend` the cells of `next` that differ from `shown` (what the screen
/// shows) in the rows the frame drew (`drawn`: ranges of rows counted from its top, each
/// drawn whole, its other rows left blank; `None`: every row), then makes `shown` what the
/// screen now shows and `next` blank for the next frame: swapped with it where every row
/// was drawn, else the rows drawn copied over and blanked.
pub(crate) fn present<B: Backend>(
    backend: &mut B,
    shown: &mut Buffer,
    next: &mut Buffer,
    drawn: Option<&[Range<u16>]>,
) -> Result<(), B::Error> {
    match drawn {
        None => {
            let written = backend
                .draw(diff::changes(shown, next))
                .and_then(|()| Backend::flush(backend));
            // The frame is now what the screen shows; the one before, blanked, takes the next.
            std::mem::swap(shown, next);
            next.reset();
            written
        }
        Some(rows) => {
            let written = backend
                .draw(
                    rows.iter()
                        .flat_map(|rows| diff::changes_in(shown, next, rows.clone())),
                )
                .and_then(|()| Backend::flush(backend));
            let width = usize::from(next.area.width);
            let len = next.content.len().min(shown.content.len());
            for rows in rows {
                let start = (usize::from(rows.start) * width).min(len);
                let end = (usize::from(rows.end) * width).min(len);
                shown.content[start..end].clone_from_slice(&next.content[start..end]);
                next.content[start..end].iter_mut().for_each(Cell::reset);
            }
            written
        }
    }
}

impl Guard {
    /// Draws a frame with `draw` and writes the cells that changed since the last
    /// ([`diff::changes`], ratatui's diff for less).
    ///
    /// Not `Terminal::draw`: that asks the terminal its size at every frame (crossterm opens
    /// `/dev/tty` for it) and hides the cursor again; here the size follows the resize
    /// events ([`Guard::autoresize`]), and the cursor stays hidden from [`enter`].
    pub(crate) fn draw(&mut self, draw: impl FnOnce(&mut Frame)) -> io::Result<()> {
        self.draw_rows(|frame, _| {
            draw(frame);
            None
        })
    }

    /// [`Guard::draw`] for a `draw` that may draw some rows only: it is told whether the
    /// screen was wiped since the last frame (a resize, a return from a stop), and says
    /// which rows it drew (see [`present`]); the others the screen shows as they are.
    pub(crate) fn draw_rows(
        &mut self,
        draw: impl FnOnce(&mut Frame, bool) -> Option<Vec<Range<u16>>>,
    ) -> io::Result<()> {
        let wiped = std::mem::take(&mut self.wiped);
        let drawn = draw(&mut self.terminal.get_frame(), wiped);
        let mut next = std::mem::take(self.terminal.current_buffer_mut());
        let written = present(
            self.terminal.backend_mut(),
            &mut self.shown,
            &mut next,
            drawn.as_deref(),
        );
        *self.terminal.current_buffer_mut() = next;
        written
    }

    /// Takes the terminal's size again after a resize: a new size clears the screen, and
    /// the next frame is written whole.
    pub(crate) fn autoresize(&mut self) -> io::Result<()> {
        self.terminal.autoresize()?;
        let area = self.terminal.current_buffer_mut().area;
        if area != self.shown.area {
            self.shown = Buffer::empty(area);
            self.wiped = true;
        }
        Ok(())
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

/// Takes the terminal: raw mode, alternate screen, hidden cursor, and the mouse when `mouse`.
pub(crate) fn enter(mouse: bool) -> io::Result<Guard> {
    install_panic_hook();
    remember_cooked_mode();
    install_fault_handlers();
    MOUSE.store(mouse, Ordering::SeqCst);
    enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    if let Err(e) =
        execute!(io::stdout(), EnterAlternateScreen, Hide).and_then(|()| capture_mouse())
    {
        restore();
        return Err(e);
    }
    let mut backend = LeanBackend::new(io::stdout());
    backend.set_line_feed_keeps_column(line_feed_keeps_column());
    match Terminal::new(backend) {
        Ok(mut terminal) => {
            // The alternate screen starts blank, as ratatui takes it.
            let shown = Buffer::empty(terminal.current_buffer_mut().area);
            Ok(Guard {
                terminal,
                shown,
                wiped: true,
            })
        }
        Err(e) => {
            restore();
            Err(e)
        }
    }
}

/// Name of the thread that reads the keys, the mouse and the resizes ([`read_input`]).
pub(crate) const INPUT_THREAD: &str = "strata-input";

/// The terminal's events, read on a thread of their own that waits for each in the kernel
/// and sends it on: the event loop is woken once an event, and only by one. (crossterm's
/// `EventStream` asks again, under its reader's lock, every time the loop wakes for
/// anything else, and spins on that lock, held by its own waiting thread: some ten
/// `sched_yield` calls a wake.) A read that fails (the terminal gone) is sent and ends the
/// thread; so does a receiver gone. The thread is not joined: the process ends with it
/// blocked in its read.
pub(crate) fn read_input(
) -> io::Result<tokio::sync::mpsc::UnboundedReceiver<io::Result<crossterm::event::Event>>> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name(INPUT_THREAD.into())
        .spawn(move || loop {
            let read = crossterm::event::read();
            let failed = read.is_err();
            if tx.send(read).is_err() || failed {
                return;
            }
        })?;
    Ok(rx)
}

/// Takes the terminal again after the process was stopped and continued (SIGCONT): raw
/// mode, the alternate screen, the cursor hidden, the mouse where it was captured, and the
/// next draw repaints every cell.
/// Raw mode is set afresh even where it was never left: while strata was stopped (by a
/// SIGSTOP, which cannot be caught) the shell may have put its own mode back.
pub(crate) fn reenter(guard: &mut Guard) -> io::Result<()> {
    let _ = disable_raw_mode();
    enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    let backend = guard.terminal.backend_mut();
    backend.set_line_feed_keeps_column(line_feed_keeps_column());
    backend.forget_pen();
    execute!(
        io::stdout(),
        EnterAlternateScreen,
        Hide,
        Clear(ClearType::All)
    )?;
    capture_mouse()?;
    // The window may have been resized while stopped.
    guard.autoresize()?;
    // Forget what the screen held (ratatui's `clear` would ask the terminal where its
    // cursor is, an answer that can be lost on the way back from a stop): the next frame
    // is written whole.
    guard.shown.reset();
    guard.wiped = true;
    Ok(())
}

/// Stops the process as SIGTSTP does by default, with the terminal given back first (the
/// shell's "Stopped" line and prompt land on its own screen, in its own mode); returns once
/// continued, with the terminal taken again. In an orphaned process group the kernel
/// discards the stop (nobody could continue it): then this returns at once.
pub(crate) fn suspend(guard: &mut Guard) -> io::Result<()> {
    restore();
    // SAFETY: plain libc calls on a zeroed sigaction; the previous action (tokio's handler,
    // which made this stop a loop event) is put back once the process continues.
    unsafe {
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        let mut previous: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGTSTP, &default, &mut previous) == 0 {
            libc::raise(libc::SIGTSTP);
            libc::sigaction(libc::SIGTSTP, &previous, std::ptr::null_mut());
        } else {
            libc::raise(libc::SIGSTOP);
        }
    }
    reenter(guard)
}

/// Ends the process by `signo` as if strata had not caught it, terminal restored: the parent
/// sees it killed by that signal (a shell's `$?` is 128 + `signo`).
pub(crate) fn die_of(signo: c_int) -> ! {
    restore();
    // SAFETY: plain libc calls; the default action of every signal this is called for ends
    // the process.
    unsafe {
        libc::signal(signo, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signo);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(signo);
    }
    std::process::exit(128 + signo)
}

/// A signal sent to strata, by what it asks of the monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReceivedSignal {
    /// Quit as on `q` (exit status 0): SIGTERM, SIGHUP, SIGINT.
    Quit,
    /// Restore the terminal, then die of this signal.
    Die(c_int),
    /// SIGTSTP: restore, stop; re-enter once continued.
    Suspend,
    /// SIGCONT: re-enter and repaint.
    Continue,
}

/// Every signal the event loop listens for, and what each asks. `Die` covers every signal
/// whose default action ends the process and that can be caught without being a fault:
/// SIGPIPE is left out because Rust ignores it (a closed terminal is a write error, which
/// restores on the error path), and SIGTTIN/SIGTTOU keep their default (a background job
/// touching the terminal stops, as the kernel intends: catching them would loop).
pub(crate) fn received_signals() -> Vec<(c_int, ReceivedSignal)> {
    let mut signals = vec![
        (libc::SIGTERM, ReceivedSignal::Quit),
        (libc::SIGHUP, ReceivedSignal::Quit),
        (libc::SIGINT, ReceivedSignal::Quit),
        (libc::SIGTSTP, ReceivedSignal::Suspend),
        (libc::SIGCONT, ReceivedSignal::Continue),
    ];
    let die = [
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGXCPU,
        libc::SIGXFSZ,
        libc::SIGIO,
        libc::SIGPWR,
        libc::SIGSTKFLT,
    ];
    signals.extend(die.into_iter().map(|s| (s, ReceivedSignal::Die(s))));
    signals.extend((libc::SIGRTMIN()..=libc::SIGRTMAX()).map(|s| (s, ReceivedSignal::Die(s))));
    signals
}

/// Listens for every signal in [`received_signals`], each on a task of its own that forwards
/// what it asks to `tx`. A signal that cannot be caught is dealt with by [`uncatchable`].
pub(crate) fn listen_for_signals(
    tx: tokio::sync::mpsc::UnboundedSender<ReceivedSignal>,
) -> io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    for (signo, action) in received_signals() {
        let mut stream = match signal(SignalKind::from_raw(signo)) {
            Ok(stream) => stream,
            Err(error) => {
                uncatchable(signo, action, error)?;
                continue;
            }
        };
        let tx = tx.clone();
        tokio::spawn(async move {
            while stream.recv().await.is_some() {
                if tx.send(action).is_err() {
                    return;
                }
            }
        });
    }
    Ok(())
}

/// Watches the terminal the keys are read from for a hangup, said on `tx` as SIGHUP says it
/// (see `terminal/hangup.rs`). After [`enter`], within the loop's runtime; where the
/// terminal's descriptor is not known (its mode could not be read) there is nothing to watch.
pub(crate) fn watch_hangup(
    tx: tokio::sync::mpsc::UnboundedSender<ReceivedSignal>,
) -> io::Result<()> {
    match COOKED.get() {
        Some((fd, _)) => hangup::watch(*fd, tx),
        None => Ok(()),
    }
}

/// What the monitor does when the signal `signo` cannot be caught (`error`, from
/// `sigaction`). One that would only end the process ([`ReceivedSignal::Die`]) keeps its
/// default: the monitor runs, and that signal ends it without a restore, as it would any
/// program. A program strata runs under may keep such a signal for itself (valgrind keeps
/// the last real-time signal). One that asks to quit, stop or go on is the monitor's own way
/// out or back, so it is an error that names it.
fn uncatchable(signo: c_int, action: ReceivedSignal, error: io::Error) -> io::Result<()> {
    match action {
        ReceivedSignal::Die(_) => Ok(()),
        ReceivedSignal::Quit | ReceivedSignal::Suspend | ReceivedSignal::Continue => {
            Err(io::Error::new(
                error.kind(),
                format!("cannot catch signal {signo}, which quits or stops the monitor: {error}"),
            ))
        }
    }
}

/// Faults, handled in the signal handler itself ([`on_fault`]).
const FAULTS: [c_int; 7] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGABRT,
    libc::SIGTRAP,
    libc::SIGSYS,
];

/// The actions the fault handlers replaced (the Rust runtime's stack-overflow report for
/// SIGSEGV and SIGBUS), in the order of [`FAULTS`], for a real fault to run into after.
static PREVIOUS_FAULT_ACTIONS: OnceLock<[libc::sigaction; FAULTS.len()]> = OnceLock::new();

/// Whether a line feed written to standard output moves the cursor down and leaves its
/// column: the output is a terminal whose output translation is off (no `OPOST`, or no
/// `ONLCR` under it), as raw mode leaves it. Asked of the output itself, which may not be the
/// terminal raw mode was set on; anything else (a pipe, a file, a failed call) says no.
fn line_feed_keeps_column() -> bool {
    line_feed_keeps_column_on(libc::STDOUT_FILENO)
}

/// [`line_feed_keeps_column`] of the descriptor `fd`.
fn line_feed_keeps_column_on(fd: c_int) -> bool {
    // SAFETY: tcgetattr on a zeroed termios.
    unsafe {
        let mut mode: libc::termios = std::mem::zeroed();
        libc::tcgetattr(fd, &mut mode) == 0
            && (mode.c_oflag & libc::OPOST == 0 || mode.c_oflag & libc::ONLCR == 0)
    }
}

/// Reads the terminal's mode before raw mode, once, on the descriptor crossterm uses
/// (standard input if it is a terminal, else `/dev/tty`, kept open for the handler).
fn remember_cooked_mode() {
    if COOKED.get().is_some() {
        return;
    }
    // SAFETY: isatty, open and tcgetattr on a zeroed termios; the descriptor opened is kept
    // for the life of the process.
    unsafe {
        let fd = if libc::isatty(libc::STDIN_FILENO) == 1 {
            libc::STDIN_FILENO
        } else {
            libc::open(c"/dev/tty".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC)
        };
        let mut mode: libc::termios = std::mem::zeroed();
        if fd >= 0 && libc::tcgetattr(fd, &mut mode) == 0 {
            let _ = COOKED.set((fd, mode));
        }
    }
}

fn install_fault_handlers() {
    FAULT_HANDLERS.call_once(|| {
        // SAFETY: sigaction with a handler that only makes async-signal-safe calls.
        unsafe {
            let mut previous: [libc::sigaction; FAULTS.len()] = std::mem::zeroed();
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_fault
                as extern "C" fn(c_int, *mut libc::siginfo_t, *mut libc::c_void)
                as libc::sighandler_t;
            // On the alternate stack, which the Rust runtime sets up: a stack overflow is a
            // SIGSEGV with no stack left.
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            for (signo, slot) in FAULTS.iter().zip(previous.iter_mut()) {
                libc::sigaction(*signo, std::ptr::null(), slot);
            }
            if PREVIOUS_FAULT_ACTIONS.set(previous).is_ok() {
                for signo in FAULTS {
                    libc::sigaction(signo, &action, std::ptr::null_mut());
                }
            }
        }
    });
}

/// The terminal restore for a signal handler, or for a failed allocation (which cannot
/// allocate): async-signal-safe calls only, and once.
pub(crate) fn restore_in_handler() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        // SAFETY: tcsetattr and write are async-signal-safe; COOKED is set before ACTIVE.
        unsafe {
            if let Some((fd, mode)) = COOKED.get() {
                libc::tcsetattr(*fd, libc::TCSANOW, mode);
            }
            if MOUSE.load(Ordering::SeqCst) {
                libc::write(
                    libc::STDOUT_FILENO,
                    MOUSE_OFF.as_ptr().cast(),
                    MOUSE_OFF.len(),
                );
            }
            libc::write(libc::STDOUT_FILENO, LEAVE.as_ptr().cast(), LEAVE.len());
        }
    }
}

/// A fault: restore the terminal, then let the signal do what it would have done. A real
/// hardware fault (SIGSEGV, SIGBUS, SIGILL, SIGFPE raised by an instruction) runs into the
/// action that was there before, as the instruction runs again on return (the runtime's
/// stack-overflow report, or the default); one sent by `kill` or `raise`, or any other
/// fault, is raised again with the default action, delivered when the handler returns.
extern "C" fn on_fault(signo: c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    restore_in_handler();
    // SAFETY: reading the kernel's siginfo; sigaction, signal and raise are
    // async-signal-safe.
    unsafe {
        let sent = info.is_null() || (*info).si_code <= 0;
        let reruns = matches!(
            signo,
            libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE
        );
        let previous = FAULTS
            .iter()
            .position(|s| *s == signo)
            .and_then(|i| PREVIOUS_FAULT_ACTIONS.get().map(|p| p[i]));
        match previous {
            Some(previous) if reruns && !sent => {
                libc::sigaction(signo, &previous, std::ptr::null_mut());
            }
            _ => {
                libc::signal(signo, libc::SIG_DFL);
                libc::raise(signo);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A signal that would only end the process and cannot be caught (valgrind keeps the
    /// last real-time signal for itself) leaves the monitor running; one that quits or
    /// stops it is an error that names it. Before, any refusal ended strata with a bare
    /// "Invalid argument (os error 22)".
    #[test]
    fn a_signal_that_cannot_be_caught_stops_the_monitor_only_if_it_quits_or_stops_it() {
        let refused = || io::Error::from_raw_os_error(libc::EINVAL);
        let rtmax = libc::SIGRTMAX();
        assert!(uncatchable(rtmax, ReceivedSignal::Die(rtmax), refused()).is_ok());
        for (signo, action) in received_signals() {
            let outcome = uncatchable(signo, action, refused());
            match action {
                ReceivedSignal::Die(_) => assert!(outcome.is_ok(), "signal {signo}"),
                _ => {
                    let message = outcome.expect_err("quits or stops").to_string();
                    assert!(message.contains(&format!("signal {signo}")), "{message}");
                    assert!(message.contains("os error 22"), "{message}");
                }
            }
        }
    }

    /// A terminal as a shell leaves it translates a line feed into a carriage return and a
    /// line feed; in raw mode, or with only `ONLCR` off, it does not; a pipe is no terminal.
    #[test]
    fn a_line_feed_keeps_the_column_in_raw_mode_only() {
        // SAFETY: openpty, tcgetattr, cfmakeraw, tcsetattr, pipe and close on descriptors this
        // test opens and closes.
        unsafe {
            let (mut leader, mut follower) = (-1, -1);
            let opened = libc::openpty(
                &mut leader,
                &mut follower,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            );
            assert_eq!(opened, 0, "openpty: {}", io::Error::last_os_error());
            let mut mode: libc::termios = std::mem::zeroed();
            assert_eq!(libc::tcgetattr(follower, &mut mode), 0);
            mode.c_oflag |= libc::OPOST | libc::ONLCR;
            assert_eq!(libc::tcsetattr(follower, libc::TCSANOW, &mode), 0);
            assert!(!line_feed_keeps_column_on(follower), "cooked");
            mode.c_oflag &= !libc::ONLCR;
            assert_eq!(libc::tcsetattr(follower, libc::TCSANOW, &mode), 0);
            assert!(line_feed_keeps_column_on(follower), "no ONLCR");
            mode.c_oflag |= libc::ONLCR;
            libc::cfmakeraw(&mut mode);
            assert_eq!(libc::tcsetattr(follower, libc::TCSANOW, &mode), 0);
            assert!(line_feed_keeps_column_on(follower), "raw");
            libc::close(leader);
            libc::close(follower);
            let mut pipe = [-1; 2];
            assert_eq!(libc::pipe(pipe.as_mut_ptr()), 0);
            assert!(!line_feed_keeps_column_on(pipe[1]), "a pipe");
            libc::close(pipe[0]);
            libc::close(pipe[1]);
        }
    }
}
