//! The full-screen monitor's event loop. The source runs on its own thread and sends owned
//! samples (a replay sends its seeks' rebuilt models too, by a driver of its own); input,
//! resize and signals arrive as events; the screen is redrawn only when something arrived.
//! The one timer (`terminal::Alarm`, which wakes the loop at its moment only) is set to the
//! moment the next poll would be overdue; while one is (NVML stuck in the driver) the header
//! counts the seconds, once a second, until the sample comes.
//! After a pause, the queued samples are applied a slice at a time between events, so keys
//! are answered while the monitor catches up.

use crate::app::{key_action, FirstScreen, PollClock, RecordRequest, State};
use crate::record::live::{LiveRecorder, News};
use crate::replay::source::ReplaySource;
use crate::replay::Played;
use crate::sample::NodeSample;
use crate::source::demand::{Demand, Wanted};
use crate::source::{Schedule, Source, SourceError};
use crate::terminal::{self, ReceivedSignal};
use crossterm::event::Event as TermEvent;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Work done on queued samples before input is looked at again.
const CATCH_UP_SLICE: Duration = Duration::from_millis(8);
/// While catching up, the screen is redrawn at most this often (with the count left).
const CATCH_UP_FRAME: Duration = Duration::from_millis(100);

/// Everything the loop reacts to.
enum Event {
    Sample(Box<NodeSample>),
    /// A replay was sought: the model rebuilt at its target.
    Rebuilt(Box<crate::replay::Model>),
    SourceFailed(String),
    /// A poll is overdue and the header's count of seconds moved on, or the moment when the
    /// next one would be overdue has come (see [`State::next_wake`]).
    Tick,
    Terminal(TermEvent),
    InputClosed,
    /// A signal sent to strata (TERM, HUP, TSTP, CONT...), by what it asks.
    Received(ReceivedSignal),
    /// Nothing else waits: apply a slice of the samples queued during a pause.
    CatchUp,
    /// The recording's writer (`r`) wrote a sample, or failed.
    Recorder(News),
}

impl From<Played> for Event {
    fn from(played: Played) -> Event {
        match played {
            Played::Sample(sample) => Event::Sample(sample),
            Played::Rebuilt(model) => Event::Rebuilt(model),
        }
    }
}

/// Runs the source on its own thread, one sample per interval, until the receiver is gone,
/// each poll's start and end marked on `clock`.
/// A panic while sampling (a bug) stops sampling and is reported on the status line; the
/// monitor stays up with the last good sample.
fn spawn_collector(
    mut source: Box<dyn Source>,
    interval: Duration,
    clock: Arc<PollClock>,
    tx: mpsc::Sender<Event>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(crate::terminal::COLLECTOR_THREAD.into())
        .spawn(move || {
            for sample in source.backlog() {
                if tx.blocking_send(Event::Sample(Box::new(sample))).is_err() {
                    return;
                }
            }
            let mut schedule = Schedule::new(Instant::now(), interval);
            poll_until_gone(
                &tx,
                &clock,
                || source.sample().map(|s| Event::Sample(Box::new(s))),
                || schedule.sleep_until_next(),
            );
        })
        .map(|_| ())
}

/// The replay's own driver: the replay source on a thread of its own, asked for what comes
/// next as soon as it has answered (it keeps the recording's time itself), until the
/// receiver is gone. A seek's rebuilt model comes as [`Event::Rebuilt`]; the rebuilding runs
/// here, so the keys keep answering during a long seek.
fn spawn_player(mut source: ReplaySource, tx: mpsc::Sender<Event>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(crate::terminal::COLLECTOR_THREAD.into())
        .spawn(move || {
            // A replay's source keeps its recording's time: no poll of it is ever overdue.
            let clock = PollClock::new();
            poll_until_gone(&tx, &clock, || source.play().map(Event::from), || {})
        })
        .map(|_| ())
}

/// Polls until the receiver is gone: each poll's start and end marked on `clock`, then what
/// it brought sent, then `between`. A failed poll is said and the next one tried; a panic
/// while polling (a bug) is said and stops the polls.
fn poll_until_gone(
    tx: &mpsc::Sender<Event>,
    clock: &PollClock,
    mut poll: impl FnMut() -> Result<Event, SourceError>,
    mut between: impl FnMut(),
) {
    loop {
        if tx.is_closed() {
            return;
        }
        clock.start(Instant::now());
        let taken = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut poll));
        clock.end();
        let (event, stop) = match taken {
            Ok(Ok(event)) => (event, false),
            Ok(Err(e)) => (Event::SourceFailed(format!("{e} ({})", e.hint())), false),
            Err(payload) => {
                let what = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                let line = format!("sampling stopped: {what} (a bug in strata: please report it)");
                (Event::SourceFailed(line), true)
            }
        };
        if tx.blocking_send(event).is_err() || stop {
            return;
        }
        between();
    }
}

/// Samples drawn after which what only they read (the first sample's fuller reads of
/// `/proc`, the first frame's layout) is let go of
/// ([`crate::footprint::release_startup_pages`]), as what starting read (the command line,
/// the loader's and the C library's start, NVML's initialisation) was before the first: the
/// next sample maps again what every sample reads.
const STEADY_AFTER: u64 = 1;

/// Runs the monitor over `source`, one sample per interval, until the user quits or a signal
/// arrives. The terminal is restored on every way out; a signal whose default is to end the
/// process then ends it, as it would have without strata catching it.
pub fn run(mut source: Box<dyn Source>, state: State, interval: Duration) -> anyhow::Result<()> {
    // After each frame the screen tells the source whose figures it shows.
    let demand = Demand::default();
    source.set_demand(demand.clone());
    let clock = PollClock::new();
    let mut state = state;
    state.keep_poll_clock(clock.clone());
    run_with(state, Some(demand), move |tx| {
        spawn_collector(source, interval, clock, tx)
    })
}

/// Tells the source what the screen as drawn wants read at the next sample (`recording`:
/// while a recording started with `r` runs); before the first sample, what the first screen
/// will show.
fn tell(demand: &Demand, state: &State, recording: bool) {
    let wanted = match state.wanted(recording) {
        None => Wanted::Everything,
        Some(pids) => {
            let rows = || crossterm::terminal::size().map_or(50, |(_, rows)| usize::from(rows));
            match state.first_screen(rows) {
                FirstScreen::Drawn => Wanted::Pids(pids),
                FirstScreen::Largest(n) => Wanted::Largest(n),
                FirstScreen::Unknown => Wanted::Everything,
            }
        }
    };
    demand.set(wanted);
}

/// Runs the monitor over a replay, driven by [`spawn_player`], as [`run`] does.
pub fn replay(source: ReplaySource, state: State) -> anyhow::Result<()> {
    run_with(state, None, move |tx| spawn_player(source, tx))
}

/// The event loop, fed by the thread `spawn` starts.
fn run_with(
    mut state: State,
    demand: Option<Demand>,
    spawn: impl FnOnce(mpsc::Sender<Event>) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    // Before the first sample, which holds the most memory the monitor will: the peak of its
    // RSS is then without the pages only starting read.
    crate::footprint::release_startup_pages();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Before the first frame nothing is on the screen: the first sample reads whole the rows
    // the first screen will show (`State::first_screen`), and the others at a first look
    // (unless the sort, a filter or a grouping from the command line wants every process).
    if let Some(demand) = &demand {
        tell(demand, &state, false);
    }
    let died_of = runtime.block_on(async move {
        let (tx, mut rx) = mpsc::channel::<Event>(1024);
        spawn(tx)?;
        let mut sampling = true;
        let (signal_tx, mut signals) = mpsc::unbounded_channel();
        terminal::listen_for_signals(signal_tx.clone())?;
        let mut guard = terminal::enter(state.setup.mouse)?;
        // A hangup is said as SIGHUP says it, though the signal may never come.
        terminal::watch_hangup(signal_tx)?;
        let mut input = terminal::read_input()?;
        let mut alarm = terminal::Alarm::new()?;
        // What the last frame drew, band by band.
        let mut bands = crate::ui::Bands::default();
        draw(&mut guard, &mut bands, &state)?;
        let mut drawn = Instant::now();
        let mut started = true;
        let mut died_of = None;
        // The recording started with `r`: dropped on every way out, which finishes its file.
        let (news_tx, mut news) = mpsc::unbounded_channel::<News>();
        let mut recorder: Option<LiveRecorder> = None;
        loop {
            let catching_up = state.catching_up();
            // Set to the moment the running poll, or the next one, would be overdue: a sample
            // that comes in time sets it later before it fires.
            let wake = state.next_wake(Instant::now());
            alarm.set(wake)?;
            // Signals and keys first: a catch-up never keeps them waiting.
            let event = tokio::select! {
                biased;
                Some(action) = signals.recv() => Event::Received(action),
                Some(item) = news.recv() => Event::Recorder(item),
                e = input.recv() => match e {
                    Some(Ok(e)) => Event::Terminal(e),
                    Some(Err(_)) | None => Event::InputClosed,
                },
                e = rx.recv(), if sampling => match e {
                    Some(e) => e,
                    None => {
                        // The collector is gone; whatever it last said stays on the status line.
                        sampling = false;
                        continue;
                    }
                },
                fired = alarm.fired(), if wake.is_some() => {
                    fired?;
                    Event::Tick
                }
                _ = std::future::ready(()), if catching_up => Event::CatchUp,
            };
            if let Event::Received(ReceivedSignal::Die(signo)) = event {
                died_of = Some(signo);
                break;
            }
            let catch_up = matches!(event, Event::CatchUp);
            let mut redraw = handle(&mut state, &mut guard, &mut recorder, event)?;
            // Take in whatever else already waits (a backlog) before drawing once.
            while let Ok(event) = rx.try_recv() {
                redraw |= handle(&mut state, &mut guard, &mut recorder, event)?;
            }
            if let Some(request) = state.recorder.request.take() {
                act_on_recording(&mut state, &mut recorder, request, &news_tx);
                redraw = true;
            }
            if state.quit {
                break;
            }
            if std::mem::take(&mut state.suspend_requested) {
                terminal::suspend(&mut guard)?;
                redraw = true;
            }
            // A catch-up slice alone redraws a few times a second, and once it is done.
            if catch_up && state.catching_up() && drawn.elapsed() < CATCH_UP_FRAME {
                redraw = false;
            }
            if redraw {
                state.refresh(Instant::now());
                match draw(&mut guard, &mut bands, &state) {
                    // The terminal hung up before its watch said so: quit as it would have.
                    Err(e) if terminal::is_hangup(&e) => break,
                    drawn => drawn?,
                }
                drawn = Instant::now();
                if let Some(demand) = &demand {
                    tell(demand, &state, recorder.is_some());
                }
                if started && state.process_table.samples_shown >= STEADY_AFTER {
                    started = false;
                    crate::footprint::release_startup_pages();
                }
            }
        }
        // Quitting while recording finishes the file, and says where it is once the screen
        // is given back.
        let parting = recorder.take().map(LiveRecorder::parting_words);
        drop(guard);
        if let Some(words) = parting {
            // Not `eprintln!`, which panics where the terminal has hung up.
            let _ = writeln!(std::io::stderr(), "strata: {words}");
        }
        anyhow::Ok(died_of)
    })?;
    if let Some(signo) = died_of {
        terminal::die_of(signo);
    }
    Ok(())
}

/// Draws a frame (the bands of it that changed, [`crate::ui::draw_bands`]) and writes what
/// changed. What the mouse can click is what this frame draws: the table's place recorded
/// by the last one is forgotten first (a view without the table records none).
fn draw(
    guard: &mut terminal::Guard,
    bands: &mut crate::ui::Bands,
    state: &State,
) -> std::io::Result<()> {
    state.mouse.table.take();
    guard.draw_rows(|frame, wiped| crate::ui::draw_bands(frame, state, bands, wiped))
}

/// Starts or stops the recording, as `r` asked.
fn act_on_recording(
    state: &mut State,
    recorder: &mut Option<LiveRecorder>,
    request: RecordRequest,
    news_tx: &mpsc::UnboundedSender<News>,
) {
    match request {
        RecordRequest::Start(path) => {
            let tx = news_tx.clone();
            match LiveRecorder::start(&path, move |item| {
                let _ = tx.send(item);
            }) {
                Ok(started) => {
                    *recorder = Some(started);
                    state.record_started(path);
                }
                Err(e) => state.record_refused(format!("{e} (hint: {})", e.hint())),
            }
        }
        RecordRequest::Stop => {
            let Some(running) = recorder.take() else {
                return;
            };
            let dropped = running.dropped;
            match running.stop() {
                Ok(done) => state.record_stopped(done.samples, done.bytes, dropped),
                Err(e) => state.record_write_failed(format!("{e} (hint: {})", e.hint())),
            }
        }
    }
}

/// Applies one event; says whether the screen needs redrawing.
fn handle(
    state: &mut State,
    guard: &mut terminal::Guard,
    recorder: &mut Option<LiveRecorder>,
    event: Event,
) -> std::io::Result<bool> {
    match event {
        Event::Sample(sample) => {
            // Recorded as it arrives, paused or not.
            if let Some(recording) = recorder.as_mut() {
                recording.send(&sample);
            }
            state.on_sample(*sample)
        }
        Event::Recorder(News::Written { samples, bytes }) => {
            // The writer took one: room for a sample held while its queue was full.
            if let Some(recording) = recorder.as_mut() {
                recording.hand_over();
            }
            state.record_progress(samples, bytes)
        }
        Event::Recorder(News::Failed(line)) => {
            // The writer has stopped; its thread ends with the error it reported.
            drop(recorder.take());
            state.record_write_failed(line);
        }
        Event::Terminal(TermEvent::Key(key)) if state.recorder.prompt.is_some() => {
            state.prompt_key(key)
        }
        Event::Terminal(TermEvent::Key(key)) if state.process_table.filter.editing => {
            state.filter_key(key)
        }
        Event::Terminal(TermEvent::Mouse(mouse)) => {
            if !state.on_mouse(mouse, Instant::now()) {
                return Ok(false);
            }
        }
        Event::Rebuilt(model) => state.on_rebuilt(*model, Instant::now()),
        Event::SourceFailed(message) => state.on_poll_failed(message),
        Event::Tick => {}
        Event::Terminal(TermEvent::Key(key)) => match key_action(key) {
            Some(action) => state.apply_action(action),
            None => return Ok(false),
        },
        Event::Terminal(TermEvent::Resize(..)) => guard.autoresize()?,
        Event::Terminal(_) => return Ok(false),
        Event::InputClosed | Event::Received(ReceivedSignal::Quit) => state.quit = true,
        // Handled by the loop, which ends the process after restoring the terminal.
        Event::Received(ReceivedSignal::Die(_)) => state.quit = true,
        Event::Received(ReceivedSignal::Suspend) => state.suspend_requested = true,
        Event::Received(ReceivedSignal::Continue) => terminal::reenter(guard)?,
        Event::CatchUp => {
            state.catch_up(CATCH_UP_SLICE);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Panicky(u32);

    impl Source for Panicky {
        fn sample(&mut self) -> Result<NodeSample, SourceError> {
            self.0 += 1;
            match self.0 {
                1 => Err(SourceError::Sample {
                    detail: "first try failed".into(),
                }),
                _ => panic!("driver answered nonsense"),
            }
        }

        fn label(&self) -> String {
            "panicky".into()
        }
    }

    #[test]
    fn a_failing_then_panicking_source_reports_and_stops_without_taking_the_monitor_down() {
        let (tx, mut rx) = mpsc::channel(8);
        let clock = PollClock::new();
        spawn_collector(
            Box::new(Panicky(0)),
            Duration::from_millis(1),
            clock.clone(),
            tx,
        )
        .expect("thread");
        let mut lines = Vec::new();
        while let Some(event) = rx.blocking_recv() {
            if let Event::SourceFailed(line) = event {
                lines.push(line);
            }
        }
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains("first try failed"));
        assert!(
            lines[1].contains("sampling stopped: driver answered nonsense"),
            "{lines:?}"
        );
        assert!(
            clock.read().is_some_and(|(_, running)| !running),
            "a poll that panicked is over, not overdue for ever"
        );
    }

    /// A replay's driver sends the recording's samples, and a seek's rebuilt model as an
    /// event of its own: the `Source` trait is not on that path.
    #[test]
    fn the_replay_driver_sends_samples_and_a_seeks_rebuilt_model() {
        let dir = crate::fixtures::TempDir::new("tui-player");
        let path = dir.join("r.strata");
        let mut writer = crate::recording::RecordWriter::create(&path, None).expect("creates");
        let samples: Vec<NodeSample> = (0..30)
            .map(|k| crate::source::demo::node_at(0, 600.0 + 10.0 * f64::from(k), 10.0))
            .collect();
        for sample in &samples {
            writer.write(sample).expect("writes");
        }
        let times: Vec<f64> = samples.iter().map(|s| s.time).collect();
        writer.finish().expect("finishes");
        let source = ReplaySource::open(&path, None).expect("opens");
        let control = source.control();
        let (tx, mut rx) = mpsc::channel(8);
        spawn_player(source, tx).expect("thread");
        match rx.blocking_recv() {
            Some(Event::Sample(sample)) => assert_eq!(sample.time, times[0]),
            _ => panic!("the first sample is not sent at once"),
        }
        // The next sample is 10 s away on the replay clock: the seek comes first.
        control.seek(crate::replay::SeekTarget::End);
        let model = match rx.blocking_recv() {
            Some(Event::Rebuilt(model)) => model,
            _ => panic!("no rebuilt model after the seek"),
        };
        assert_eq!(model.time(), times.last().copied());
        // Gone: the driver's next send fails, and it stops.
        drop(rx);
        control.seek(crate::replay::SeekTarget::End);
    }

    /// A source whose polls wait to be let go, like NVML on a busy driver: each says when
    /// it has started, and ends when `release` gives it leave.
    struct Held {
        polls: u32,
        started: std::sync::mpsc::Sender<()>,
        release: std::sync::mpsc::Receiver<()>,
    }

    impl Source for Held {
        fn sample(&mut self) -> Result<NodeSample, SourceError> {
            self.polls += 1;
            let _ = self.started.send(());
            let _ = self.release.recv();
            Ok(crate::source::demo::node_at(0, f64::from(self.polls), 1.0))
        }

        fn label(&self) -> String {
            "held".into()
        }
    }

    /// The loop is not woken when a poll starts, but the clock it reads says so, with when,
    /// while the thread is still stuck in the poll: that is what lets the header say a poll
    /// has been running too long. Once the poll ends, the clock says so before its sample
    /// comes.
    #[test]
    fn the_collector_marks_each_poll_on_the_clock() {
        let (tx, mut rx) = mpsc::channel(8);
        let (started_tx, started) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel();
        let held = Held {
            polls: 0,
            started: started_tx,
            release: release_rx,
        };
        let clock = PollClock::new();
        assert_eq!(clock.read(), None, "no poll yet");
        let before = Instant::now();
        // The next poll an hour away: the one poll here is the one on the clock.
        spawn_collector(Box::new(held), Duration::from_secs(3600), clock.clone(), tx)
            .expect("thread");
        started.recv().expect("a poll starts");
        let (at, running) = clock.read().expect("the poll is on the clock");
        assert!(running, "the poll runs");
        assert!(at >= before && at <= Instant::now(), "when it started");
        assert!(rx.try_recv().is_err(), "nothing sent while the poll runs");
        release.send(()).expect("released");
        match rx.blocking_recv() {
            Some(Event::Sample(_)) => {}
            _ => panic!("no sample after the poll"),
        }
        assert_eq!(
            clock.read(),
            Some((at, false)),
            "over before its sample came"
        );
    }
}
