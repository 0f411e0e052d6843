//! The full-screen monitor's event loop. The source runs on its own thread and sends owned
//! samples; input, resize and signals arrive as events; the screen is redrawn only when
//! something arrived, never on a timer.

use crate::app::{key_action, State};
use crate::sample::NodeSample;
use crate::source::Source;
use crate::terminal;
use crossterm::event::{Event as TermEvent, EventStream};
use futures::StreamExt;
use std::time::{Duration, Instant};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

/// Everything the loop reacts to.
enum Event {
    Sample(Box<NodeSample>),
    SourceFailed(String),
    Terminal(TermEvent),
    InputClosed,
    Signal,
}

/// Runs the source on its own thread, one sample per interval, until the receiver is gone.
fn spawn_collector(mut source: Box<dyn Source>, interval: Duration, tx: mpsc::Sender<Event>) {
    std::thread::Builder::new()
        .name("strata-collector".into())
        .spawn(move || {
            for sample in source.backlog() {
                if tx.blocking_send(Event::Sample(Box::new(sample))).is_err() {
                    return;
                }
            }
            let mut next = Instant::now();
            loop {
                let event = match source.sample() {
                    Ok(sample) => Event::Sample(Box::new(sample)),
                    Err(e) => Event::SourceFailed(format!("{e} ({})", e.hint())),
                };
                if tx.blocking_send(event).is_err() {
                    return;
                }
                next += interval;
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else {
                    // Fell behind (a slow poll): start the schedule again from now.
                    next = now;
                }
            }
        })
        .map(|_| ())
        .unwrap_or_else(|_| ());
}

/// Runs the monitor until the user quits or a signal arrives. The terminal is restored on
/// every way out.
pub fn run(source: Box<dyn Source>, mut state: State, interval: Duration) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let (tx, mut rx) = mpsc::channel::<Event>(1024);
        spawn_collector(source, interval, tx.clone());
        let mut sigterm = signal(SignalKind::terminate())?;
        let mut sighup = signal(SignalKind::hangup())?;
        let mut sigint = signal(SignalKind::interrupt())?;
        let mut guard = terminal::enter()?;
        let mut input = EventStream::new();
        guard.terminal.draw(|f| crate::ui::draw(f, &state))?;
        loop {
            let event = tokio::select! {
                Some(e) = rx.recv() => e,
                e = input.next() => match e {
                    Some(Ok(e)) => Event::Terminal(e),
                    Some(Err(_)) | None => Event::InputClosed,
                },
                _ = sigterm.recv() => Event::Signal,
                _ = sighup.recv() => Event::Signal,
                _ = sigint.recv() => Event::Signal,
            };
            let mut redraw = handle(&mut state, &mut guard, event)?;
            // Take in whatever else already waits (a backlog) before drawing once.
            while let Ok(event) = rx.try_recv() {
                redraw |= handle(&mut state, &mut guard, event)?;
            }
            if state.quit {
                break;
            }
            if redraw {
                guard.terminal.draw(|f| crate::ui::draw(f, &state))?;
            }
        }
        drop(guard);
        Ok(())
    })
}

/// Applies one event; says whether the screen needs redrawing.
fn handle(state: &mut State, guard: &mut terminal::Guard, event: Event) -> std::io::Result<bool> {
    match event {
        Event::Sample(sample) => state.on_sample(*sample),
        Event::SourceFailed(message) => state.status = Some(message),
        Event::Terminal(TermEvent::Key(key)) => match key_action(key) {
            Some(action) => state.apply_action(action),
            None => return Ok(false),
        },
        Event::Terminal(TermEvent::Resize(..)) => guard.terminal.autoresize()?,
        Event::Terminal(_) => return Ok(false),
        Event::InputClosed | Event::Signal => state.quit = true,
    }
    Ok(true)
}
