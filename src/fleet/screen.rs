//! The fleet's terminal: a reader thread reads the source every refresh (or at `r`), the
//! screen draws what it last read. The terminal is restored on every way out, as the node
//! monitor's is (`crate::terminal`).

use super::detail::Detail;
use super::model::{Fleet, Window};
use super::view::{draw, FleetView};
use super::Source;
use crate::terminal::{self, ReceivedSignal};
use crossterm::event::{Event as TermEvent, KeyEventKind};
use std::time::Duration;
use tokio::sync::mpsc;

/// What the screen asks the reader for besides its refresh.
enum Ask {
    /// Read the fleet now.
    Refresh,
    /// Read this node's detail now, and at each refresh until another is asked.
    Detail(Option<String>),
}

/// What the reader sends the screen.
enum Got {
    Fleet(Result<Fleet, String>),
    Detail(String, Result<Detail, String>),
}

enum Event {
    Read(Box<Got>),
    Terminal(TermEvent),
    Signal(ReceivedSignal),
    Tick,
    InputClosed,
}

pub fn run(
    source: Source,
    scrape_interval: f64,
    refresh: f64,
    view: FleetView,
) -> anyhow::Result<()> {
    let window = std::sync::Arc::new(std::sync::Mutex::new(view.window()));
    let wanted = window.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let died_of = runtime.block_on(async move {
        let (tx, mut rx) = mpsc::channel::<Got>(4);
        let (ask_tx, ask_rx) = std::sync::mpsc::channel::<Ask>();
        std::thread::Builder::new()
            .name("strata-fleet-reader".into())
            .spawn(move || {
                let mut open: Option<String> = None;
                let mut fleet_due = true;
                loop {
                    if fleet_due {
                        let w = wanted
                            .lock()
                            .map(|w| w.clone())
                            .unwrap_or_else(|_| Window::all());
                        if tx
                            .blocking_send(Got::Fleet(source.read(scrape_interval, &w)))
                            .is_err()
                        {
                            return;
                        }
                    }
                    if let Some(instance) = &open {
                        let got = source.detail(instance);
                        if tx
                            .blocking_send(Got::Detail(instance.clone(), got))
                            .is_err()
                        {
                            return;
                        }
                    }
                    // Until the next refresh, or sooner when asked.
                    match ask_rx.recv_timeout(Duration::from_secs_f64(refresh)) {
                        Ok(Ask::Refresh) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                            fleet_due = true;
                        }
                        Ok(Ask::Detail(instance)) => {
                            open = instance;
                            fleet_due = false;
                        }
                        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
                    }
                }
            })?;
        let (signal_tx, mut signals) = mpsc::unbounded_channel();
        terminal::listen_for_signals(signal_tx)?;
        let mut guard = terminal::enter(false)?;
        let mut input = terminal::read_input()?;
        let mut view = view;
        view.now = super::now();
        let mut last_asked = view.window();
        let mut died_of = None;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        // The node whose detail the reader was last asked for.
        let mut asked: Option<String> = None;
        loop {
            paint(&mut guard, &view)?;
            let event = tokio::select! {
                biased;
                Some(action) = signals.recv() => Event::Signal(action),
                e = input.recv() => match e {
                    Some(Ok(e)) => Event::Terminal(e),
                    Some(Err(_)) | None => Event::InputClosed,
                },
                Some(read) = rx.recv() => Event::Read(Box::new(read)),
                _ = tick.tick() => Event::Tick,
            };
            view.now = super::now();
            match event {
                Event::Signal(ReceivedSignal::Die(signo)) => {
                    died_of = Some(signo);
                    break;
                }
                Event::Signal(ReceivedSignal::Quit) => break,
                Event::Signal(ReceivedSignal::Suspend) => terminal::suspend(&mut guard)?,
                Event::Signal(ReceivedSignal::Continue) => terminal::reenter(&mut guard)?,
                Event::InputClosed => break,
                Event::Terminal(TermEvent::Key(k)) if k.kind != KeyEventKind::Release => {
                    let ctrl_c = k.code == crossterm::event::KeyCode::Char('c')
                        && k.modifiers
                            .contains(crossterm::event::KeyModifiers::CONTROL);
                    if ctrl_c {
                        break;
                    }
                    view.key(k.code);
                }
                Event::Terminal(TermEvent::Resize(..)) => {
                    guard.autoresize()?;
                }
                Event::Terminal(_) | Event::Tick => {}
                Event::Read(got) => match *got {
                    Got::Fleet(Ok(fleet)) => {
                        view.fleet = Some(fleet);
                        view.error = None;
                    }
                    Got::Fleet(Err(why)) => view.error = Some(why),
                    Got::Detail(instance, got) => {
                        if view.open.as_deref() == Some(instance.as_str()) {
                            view.detail = Some(got);
                        }
                    }
                },
            }
            if view.quit {
                break;
            }
            // Another order, filter or a selection past the rows read: read them now.
            let now_asked = view.window();
            if now_asked != last_asked {
                if let Ok(mut w) = window.lock() {
                    *w = now_asked.clone();
                }
                last_asked = now_asked;
                view.refresh_now = true;
            }
            if std::mem::take(&mut view.refresh_now) {
                let _ = ask_tx.send(Ask::Refresh);
            }
            if view.open != asked {
                asked = view.open.clone();
                view.detail = None;
                let _ = ask_tx.send(Ask::Detail(asked.clone()));
            }
        }
        drop(guard);
        anyhow::Ok(died_of)
    })?;
    if let Some(signo) = died_of {
        terminal::die_of(signo);
    }
    Ok(())
}

fn paint(guard: &mut terminal::Guard, view: &FleetView) -> std::io::Result<()> {
    guard.draw(|frame| draw(frame, view))
}
