//! The header line (host, versions, clock, state) and the footer (keys, status). The words
//! for the monitor's state are in `mode.rs`.

use super::mode::mode;
use super::theme::Theme;
use super::widgets::Paint;
use crate::accounting::GroupBy;
use crate::app::{Focus, State, View};
use crate::present::fit;
use crate::present::sort::SortKey;
use crate::units;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use std::borrow::Cow;

/// What the header says, once, when strata runs in its own PID namespace (a container without
/// `--pid=host`), longest first: the richest that fits is shown.
const OWN_PID_NAMESPACE: [&str; 5] = [
    "in a container (own PID namespace): NVML's processes are not visible here (no users, commands, zombies); run strata on the host or with --pid=host",
    "own PID namespace: NVML's processes not visible here (no users, commands, zombies); run on the host or with --pid=host",
    "own PID namespace: no users/commands/zombies; use host or --pid=host",
    "own PID namespace: processes not visible; use --pid=host",
    "own PID ns: use --pid=host",
];

pub(crate) fn draw_header(paint: &mut Paint, area: Rect, state: &State, theme: Theme) {
    let sample = state.current.as_ref().map(|o| &o.sample);
    let host = crate::text::clean(sample.map_or("…", |s| s.host.as_str()));
    let driver = crate::text::clean(
        sample
            .and_then(|s| s.driver_version.as_deref())
            .unwrap_or("n/a"),
    );
    let cuda = crate::text::clean(
        sample
            .and_then(|s| s.cuda_driver_version.as_deref())
            .unwrap_or("n/a"),
    );
    let gpus = sample.map_or(0, |s| s.gpus.len());
    // The demo's story runs faster than the clock: its time is story time, never called UTC.
    let story = state.setup.demo;
    // One clock, said at every width: wall-clock UTC, or the demo's story time, labelled.
    let clock = match sample {
        None => "--:--:-- UTC".into(),
        Some(s) if story => crate::source::demo::story_time(s.time),
        Some(s) => format!("{} UTC", units::clock(s.time)),
    };
    let (mode, mode_short) = mode(state);
    let plural = if gpus == 1 { "" } else { "s" };
    let label = &state.setup.source_label;
    // The interval of the samples themselves, as the JSON says (the demo's in story seconds).
    let interval = units::interval(sample.map_or(state.setup.interval, |s| s.interval));
    // The richest line that fits; the state (live, stale, paused, recording) is in every one.
    // The host's CPU and memory, where known: in every line down to the narrowest ones, which
    // keep the state, the host and the clock first.
    let figures = sample.and_then(super::host::header_figures);
    let (figures_long, figures_short) = match &figures {
        Some((long, short)) => (format!(" │ {long}"), format!(" │ {short}")),
        None => (String::new(), String::new()),
    };
    // Each line is made only when the ones before it did not fit: a frame formats the one it
    // shows and the wider ones, not all of them. Lines 0 to 6 are every header's; 7 and 8,
    // leaner still, serve only beside the own-PID-namespace note.
    #[rustfmt::skip] // the lines are long, and kept one to a row as the header shows them
    let line = |k: usize| match k {
        0 => format!(" strata │ {host} [{label}] │ driver {driver} │ CUDA {cuda} │ {gpus} GPU{plural} │ every {interval} │ {clock}{figures_long} │ {mode} │ ? help"),
        1 => format!(" strata │ {host} │ driver {driver} │ CUDA {cuda} │ {gpus} GPU{plural} │ every {interval} │ {clock}{figures_short} │ {mode}"),
        2 => format!(" strata {host} │ drv {driver} │ CUDA {cuda} │ {gpus}GPU │ {interval} │ {clock}{figures_short} │ {mode_short}"),
        3 => format!(" {host} │ drv {driver} │ CUDA {cuda} │ {gpus}GPU │ {interval} │ {clock}{figures_short} │ {mode_short}"),
        4 => format!(" {host} │ drv {driver} │ CUDA {cuda} │ {gpus}GPU │ {interval} │ {clock} │ {mode_short}"),
        5 => format!(" {mode_short} │ {host} │ {clock}{figures_short} │ drv {driver} │ CUDA {cuda}"),
        6 => format!(" {mode_short} │ {host} │ {clock} │ drv {driver} │ CUDA {cuda}"),
        7 => format!(" {mode_short} │ {host} │ {clock}"),
        _ => format!(" {mode_short}"),
    };
    let width = area.width as usize;
    let text = if sample.and_then(|s| s.host_pid_namespace) == Some(false) {
        // The note matters more than the versions and the clock: each note with every line,
        // down to the leanest, before the next shorter note.
        first_that_fits(
            OWN_PID_NAMESPACE
                .iter()
                .flat_map(|note| (0..9).map(move |k| (note, k)))
                .map(|(note, k)| format!("{} │ {note}", line(k))),
            width,
        )
    } else {
        first_that_fits((0..7).map(line), width)
    };
    let padded = format!("{:<width$}", fit(&text, width));
    let style = if state.polls.freshness.is_live() || theme.mono {
        theme.header_bar()
    } else {
        Style::new().fg(Color::Black).bg(Color::Yellow)
    };
    paint.lines(area, vec![Line::styled(padded, style)]);
}

/// The first of `lines` no wider than `width`, else the last (cut to the width by its caller).
fn first_that_fits(lines: impl Iterator<Item = String>, width: usize) -> String {
    let mut last = String::new();
    for line in lines {
        if line.chars().count() <= width {
            return line;
        }
        last = line;
    }
    last
}

/// What the main screen's footer was drawn from while it shows the keys' hints, kept from
/// one frame to the next ([`footer`]).
#[derive(Debug, Default)]
pub(crate) struct FooterKept {
    from: Option<Hinted>,
    /// What it drew, in a debug build, to compare with each paint it spares.
    #[cfg(debug_assertions)]
    paint: Paint,
    /// Footers worked out, not kept.
    #[cfg(test)]
    pub(crate) worked_out: usize,
}

impl FooterKept {
    /// Lets go of what the footer was drawn from: the frame that drew it is gone.
    pub(crate) fn forget(&mut self) {
        self.from = None;
    }
}

/// Everything the main screen's hints are drawn from: where, in what theme, and the state
/// their words follow (a replay or not, paused, the focus, the order, a recording, the
/// grouping). Nothing else of the state reaches them.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Hinted {
    area: Rect,
    theme: Theme,
    replay: bool,
    paused: bool,
    focus: Focus,
    sort: SortKey,
    reversed: bool,
    recording: bool,
    group_by: GroupBy,
}

impl Hinted {
    /// `None` off the main screen.
    fn of(area: Rect, state: &State, theme: Theme) -> Option<Hinted> {
        matches!(state.view, View::Main).then(|| Hinted {
            area,
            theme,
            replay: state.replay.is_some(),
            paused: paused(state),
            focus: state.focus,
            sort: state.process_table.sort,
            reversed: state.process_table.sort_reversed,
            recording: state.recorder.recording.is_some(),
            group_by: state.process_table.group_by,
        })
    }
}

/// The main screen's footer ([`draw_footer`]), or `None` where `kept` says the last frame's
/// stands: the keys' hints drawn from what the last frame's were. A still node's footer is
/// not worked out again at every sample.
pub(crate) fn footer(
    area: Rect,
    state: &State,
    theme: Theme,
    kept: &mut FooterKept,
) -> Option<Paint> {
    let paint_of = |line| {
        let mut paint = Paint::default();
        paint.lines(area, vec![line]);
        paint
    };
    // A prompt, a failed poll, a dialog's keys, an attach under way or a notice: drawn at
    // every frame, and the hints worked out anew after it.
    if let Some(line) = message(area, state, theme) {
        kept.forget();
        return Some(paint_of(line));
    }
    let draw = || paint_of(view_hints(area, state, theme));
    let Some(from) = Hinted::of(area, state, theme) else {
        kept.forget();
        return Some(draw());
    };
    if kept.from == Some(from) {
        #[cfg(debug_assertions)]
        assert_eq!(
            draw(),
            kept.paint,
            "the footer, drawn from what the last frame's was, differs from it: Hinted \
             misses something it reads"
        );
        return None;
    }
    let paint = draw();
    #[cfg(test)]
    {
        kept.worked_out += 1;
    }
    #[cfg(debug_assertions)]
    {
        kept.paint = paint.clone();
    }
    kept.from = Some(from);
    Some(paint)
}

pub(crate) fn draw_footer(paint: &mut Paint, area: Rect, state: &State, theme: Theme) {
    let line = message(area, state, theme).unwrap_or_else(|| view_hints(area, state, theme));
    paint.lines(area, vec![line]);
}

/// Whether the data shown is paused: the replay's own pause in a replay.
fn paused(state: &State) -> bool {
    match &state.replay {
        Some(replay) => replay.status.paused,
        None => state.pause.paused,
    }
}

/// What the footer says in place of the keys' hints, if anything: the record prompt, a
/// failed poll, a dialog's keys, an attach under way, a notice.
fn message(area: Rect, state: &State, theme: Theme) -> Option<Line<'static>> {
    let line = if let Some(prompt) = &state.recorder.prompt {
        // The name as typed, safe for the terminal; its end shows when it is long.
        let name = crate::text::clean(&prompt.text);
        let help = "  ⏎ start  esc cancel";
        let room =
            (area.width as usize).saturating_sub(" record to: ".len() + help.chars().count() + 1);
        let count = name.chars().count();
        let shown: String = name.chars().skip(count.saturating_sub(room)).collect();
        Line::from(vec![
            Span::raw(" record to: "),
            Span::styled(format!("{shown}█"), theme.header_bar()),
            Span::styled(help, theme.dim()),
        ])
    } else if let Some(status) = &state.polls.error {
        Line::styled(fit(status, area.width as usize), theme.alert())
    } else if let Some(open) = &state.kill.dialog {
        let keys = format!(" {}", super::dialog::keys(open.stage));
        Line::styled(fit(&keys, area.width as usize), theme.dim())
    } else if state.attach.offer.is_some() {
        let keys = format!(" {}", super::dialog::ATTACH_KEYS);
        Line::styled(fit(&keys, area.width as usize), theme.dim())
    } else if let (Some(busy), None) = (&state.attach.under_way, &state.notice) {
        let text = format!(" attaching to PID {}…", busy.pid);
        Line::styled(fit(&text, area.width as usize), Style::new())
    } else if let Some(notice) = &state.notice {
        let style = if notice.alert {
            theme.alert()
        } else {
            Style::new()
        };
        Line::styled(
            fit(&format!(" {}", notice.text), area.width as usize),
            style,
        )
    } else {
        return None;
    };
    Some(line)
}

/// The keys' hints of the view, in order of use: as many as the width allows.
fn view_hints(area: Rect, state: &State, theme: Theme) -> Line<'static> {
    let pause = if paused(state) { "resume" } else { "pause" };
    let hints: Vec<Hint> = match state.view {
        View::Main if state.replay.is_some() => vec![
            Hint::kept("q quit"),
            Hint::new(format!("p {pause}"), format!("p {pause}")),
            Hint::new("+/- speed", "+- speed"),
            Hint::new("←/→ -1m/+1m", "←→ ±1m"),
            Hint::new("g/G start/end", "g G ends"),
            Hint::new("↑↓ move", "↑↓ move"),
            Hint::new("⏎ open", "⏎ open"),
            Hint::new("tab focus", "tab focus"),
            Hint::new("v strata", "v strata"),
            Hint::kept("? help"),
        ],
        View::Main => {
            let (focus, open) = match state.focus {
                Focus::Processes => ("processes", "detail"),
                Focus::Findings => ("findings", "evidence"),
            };
            let sort = state.process_table.sort.label();
            let arrow =
                crate::app::sort_arrow(state.process_table.sort, state.process_table.sort_reversed);
            let (record, rec) = if state.recorder.recording.is_some() {
                ("stop rec", "stop")
            } else {
                ("record", "rec")
            };
            // In order of use; the arrows last, as what a newcomer tries first anyway.
            vec![
                Hint::kept("q quit"),
                Hint::new(format!("⏎ {open}"), format!("⏎ {open}")),
                Hint::new(format!("tab focus:{focus}"), format!("tab {focus}")),
                Hint::new(format!("s sort:{sort}{arrow}"), "s sort"),
                Hint::new("S reverse", "S rev"),
                Hint::new("K signal", "K signal"),
                Hint::new("v strata", "v strata"),
                Hint::new(format!("p {pause}"), format!("p {pause}")),
                Hint::new(
                    format!("g group:{}", state.process_table.group_by.label()),
                    "g group",
                ),
                Hint::new("a attach", "a attach"),
                Hint::new(format!("r {record}"), format!("r {rec}")),
                Hint::new("R report", "R report"),
                Hint::new("↑↓ jk move", "↑↓ move"),
                Hint::kept("? help"),
            ]
        }
        View::Group { .. } => vec![
            Hint::kept("esc back"),
            Hint::new("↑↓ finding", "↑↓ finding"),
            Hint::new("⏎ its evidence", "⏎ evidence"),
            Hint::kept("q quit"),
            Hint::new(format!("p {pause}"), format!("p {pause}")),
            Hint::kept("? help"),
        ],
        View::Sites { .. } => vec![
            Hint::kept("esc back"),
            Hint::new("w record again", "w again"),
            Hint::new("↑↓ scroll", "↑↓ scroll"),
            Hint::kept("q quit"),
            Hint::new(format!("p {pause}"), format!("p {pause}")),
            Hint::kept("? help"),
        ],
        View::Detail { .. } => vec![
            Hint::kept("esc back"),
            Hint::new("↑↓ scroll", "↑↓ scroll"),
            Hint::new("w sites", "w sites"),
            Hint::new("K signal", "K signal"),
            Hint::new("v strata", "v strata"),
            Hint::kept("q quit"),
            Hint::new(format!("p {pause}"), format!("p {pause}")),
            Hint::kept("? help"),
        ],
        View::Evidence(_) => vec![
            Hint::kept("esc back"),
            Hint::new("↑↓ scroll", "↑↓ scroll"),
            Hint::new("K signal", "K signal"),
            Hint::new("v strata", "v strata"),
            Hint::kept("q quit"),
            Hint::new(format!("p {pause}"), format!("p {pause}")),
            Hint::kept("? help"),
        ],
        View::Strata => {
            let zoom = state.strata.zoom.label();
            vec![
                Hint::kept("esc/v back"),
                Hint::new("↑↓ device", "↑↓ device"),
                Hint::new(
                    format!("z/+/- zoom:{zoom} (15m 2h 24h)"),
                    format!("z zoom:{zoom}"),
                ),
                Hint::kept("q quit"),
                Hint::new(format!("p {pause}"), format!("p {pause}")),
                Hint::kept("? help"),
            ]
        }
        View::Help => vec![
            Hint::kept("esc/? back"),
            Hint::new("↑↓ jk PgUp PgDn scroll", "↑↓ scroll"),
            Hint::kept("q quit"),
        ],
    };
    let keys = hints_line(&hints, area.width as usize);
    Line::from(Span::styled(fit(&keys, area.width as usize), theme.dim()))
}

/// One key's hint in the footer, in its long and short forms.
struct Hint {
    long: Cow<'static, str>,
    short: Cow<'static, str>,
    /// Shown at every width (`q`, `?`, the way back).
    kept: bool,
}

impl Hint {
    fn new(long: impl Into<Cow<'static, str>>, short: impl Into<Cow<'static, str>>) -> Hint {
        Hint {
            long: long.into(),
            short: short.into(),
            kept: false,
        }
    }

    fn kept(text: &'static str) -> Hint {
        Hint {
            long: Cow::Borrowed(text),
            short: Cow::Borrowed(text),
            kept: true,
        }
    }
}

/// The footer's hints as `width` allows: all of them in their long forms, else in their
/// short ones, else as many as fit in order of use, the kept ones always.
fn hints_line(hints: &[Hint], width: usize) -> String {
    let line = |chosen: &[bool], short: bool, gap: &str| -> String {
        let parts: Vec<&str> = hints
            .iter()
            .zip(chosen)
            .filter(|(_, &c)| c)
            .map(|(h, _)| if short { &*h.short } else { &*h.long })
            .collect();
        format!(" {}", parts.join(gap))
    };
    let fits = |text: &str| text.chars().count() <= width;
    let all = vec![true; hints.len()];
    for (short, gap) in [(false, "  "), (true, "  "), (true, " ")] {
        let text = line(&all, short, gap);
        if fits(&text) {
            return text;
        }
    }
    let mut chosen: Vec<bool> = hints.iter().map(|h| h.kept).collect();
    for i in 0..hints.len() {
        if chosen[i] {
            continue;
        }
        chosen[i] = true;
        if !fits(&line(&chosen, true, " ")) {
            chosen[i] = false;
            break;
        }
    }
    line(&chosen, true, " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::Pipeline;
    use crate::source::demo::node_at;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;
    use std::time::{Duration, Instant};

    const WIDTHS: [u16; 7] = [60, 70, 80, 100, 120, 160, 250];

    /// The monitor on the NVML path, one sample shown since `t0`.
    fn state(t0: Instant) -> State {
        let mut state = State::new(
            Pipeline::new(None),
            "nvml libnvidia-ml.so.1 + feeds".into(),
            1.0,
        );
        state.on_sample_at(node_at(0, 600.0, 10.0), t0);
        state.refresh(t0);
        state
    }

    fn header(state: &State, width: u16) -> String {
        let mut terminal = Terminal::new(TestBackend::new(width, 30)).expect("test backend");
        terminal
            .draw(|f| super::super::draw(f, state))
            .expect("draws");
        let buffer = terminal.backend().buffer();
        (0..width)
            .map(|x| buffer[(x, 0)].symbol().to_string())
            .collect::<String>()
            .trim_end()
            .to_string()
    }

    /// NVML stuck in a poll: 12 s after the data shown arrived, its poll has run 9 s. Every
    /// width says the data is stale and that a poll is running, and nowhere "live".
    #[test]
    fn a_stalled_poll_shows_the_data_age_and_the_poll_at_every_width() {
        let t0 = Instant::now();
        let mut state = state(t0);
        state.on_poll_started(t0 + Duration::from_secs(3));
        state.refresh(t0 + Duration::from_secs(12));
        for width in WIDTHS {
            let line = header(&state, width);
            assert!(line.contains("◌ stale 12s · "), "{width}: {line}");
            assert!(
                line.contains("poll 9s") || line.contains("poll running 9s"),
                "{width}: {line}"
            );
            assert!(!line.contains("live"), "{width}: {line}");
        }
        assert!(header(&state, 250).contains("◌ stale 12s · NVML poll running 9s"));
        // The sample comes: live again.
        state.on_sample_at(node_at(0, 610.0, 10.0), t0 + Duration::from_secs(13));
        state.refresh(t0 + Duration::from_secs(13));
        for width in WIDTHS {
            let line = header(&state, width);
            assert!(line.contains("● live"), "{width}: {line}");
            assert!(!line.contains("stale"), "{width}: {line}");
        }
    }

    /// One clock, said: wherever the header shows the time it says UTC, and the interval is
    /// spelled one way (`1s`, never `1.0s`).
    #[test]
    fn the_clock_says_utc_and_the_interval_is_spelled_once_at_every_width() {
        let t0 = Instant::now();
        let state = state(t0);
        let time = units::clock(state.current.as_ref().expect("a sample").sample.time);
        for width in WIDTHS {
            let line = header(&state, width);
            if line.contains(&time) {
                assert!(line.contains(&format!("{time} UTC")), "{width}: {line}");
            }
            assert!(!line.contains(".0s"), "{width}: {line}");
        }
        let wide = header(&state, 250);
        assert!(wide.contains("every 10s │"), "{wide}");
    }

    #[test]
    fn a_failed_poll_shows_the_data_age_at_every_width() {
        let t0 = Instant::now();
        let mut state = state(t0);
        state.on_poll_started(t0 + Duration::from_secs(1));
        state.on_poll_failed("NVML: Unknown Error (hint)".into());
        state.refresh(t0 + Duration::from_secs(125));
        for width in WIDTHS {
            let line = header(&state, width);
            assert!(line.contains("◌ stale 2m05s · "), "{width}: {line}");
            assert!(line.contains("poll failed"), "{width}: {line}");
        }
    }

    /// A recording shows at every width, live, paused or stale: the file's name (its start
    /// where narrow) and its size so far.
    #[test]
    fn a_recording_shows_at_every_width_and_in_every_state() {
        let t0 = Instant::now();
        let mut state = state(t0);
        state.record_started("/data/strata-gpu-node-7-20261129-150245.jsonl.zst".into());
        state.record_progress(12, 1_300_000);
        let long = "● rec strata-gpu-node-7-20261129-150245.jsonl.zst 1.24 MiB";
        assert!(
            header(&state, 250).contains(long),
            "{}",
            header(&state, 250)
        );
        for width in WIDTHS {
            let line = header(&state, width);
            assert!(line.contains("● rec strata-gpu-node-7"), "{width}: {line}");
        }
        state.apply_action(crate::app::Action::TogglePause);
        state.on_sample_at(node_at(0, 610.0, 10.0), t0);
        for width in WIDTHS {
            let line = header(&state, width);
            assert!(line.contains("‖ paused"), "{width}: {line}");
            assert!(line.contains("● rec strata-gpu-node-7"), "{width}: {line}");
        }
        state.apply_action(crate::app::Action::TogglePause);
        while state.catch_up(Duration::ZERO) > 0 {}
        state.on_poll_started(t0 + Duration::from_secs(1));
        state.refresh(t0 + Duration::from_secs(6));
        for width in WIDTHS {
            let line = header(&state, width);
            assert!(line.contains("◌ stale"), "{width}: {line}");
            assert!(line.contains("● rec strata-gpu-node-7"), "{width}: {line}");
        }
        // A write error: the header says the recording stopped.
        state.record_write_failed("cannot write the recording: disk full".into());
        for width in WIDTHS {
            let line = header(&state, width);
            assert!(line.contains("✗ rec"), "{width}: {line}");
            assert!(!line.contains("● rec"), "{width}: {line}");
        }
    }

    /// In a container without `--pid=host`, the header says so once, with what it limits and
    /// what to do, from 80 columns on; the state stays first in line at every width.
    #[test]
    fn in_its_own_pid_namespace_the_header_says_so_and_what_to_do() {
        let t0 = Instant::now();
        let mut state = state(t0);
        let mut sample = node_at(0, 610.0, 10.0);
        sample.host_pid_namespace = Some(false);
        state.on_sample_at(sample, t0);
        state.refresh(t0);
        for width in WIDTHS {
            let line = header(&state, width);
            assert!(line.contains("● live"), "{width}: {line}");
            assert_eq!(
                line.matches("PID n").count(),
                1,
                "said once: {width}: {line}"
            );
            if width >= 80 {
                assert!(line.contains("own PID namespace"), "{width}: {line}");
                assert!(line.contains("--pid=host"), "{width}: {line}");
            }
        }
        let line = header(&state, 80);
        assert!(line.contains("no users/commands/zombies"), "{line}");
        assert!(line.contains("host"), "{line}");
        let line = header(&state, 250);
        assert!(
            line.contains("NVML's processes are not visible here (no users, commands, zombies); run strata on the host or with --pid=host"),
            "{line}"
        );
        assert!(
            line.contains("demo-node"),
            "and the rest of the header: {line}"
        );
        // Stalled, too: both the state and the note.
        state.on_poll_started(t0 + Duration::from_secs(1));
        state.refresh(t0 + Duration::from_secs(5));
        let line = header(&state, 80);
        assert!(line.contains("◌ stale 5s"), "{line}");
        assert!(line.contains("--pid=host"), "{line}");
    }

    #[test]
    fn on_the_host_or_unknown_there_is_no_namespace_note() {
        let t0 = Instant::now();
        for namespace in [Some(true), None] {
            let mut state = state(t0);
            let mut sample = node_at(0, 610.0, 10.0);
            sample.host_pid_namespace = namespace;
            state.on_sample_at(sample, t0);
            for width in WIDTHS {
                let line = header(&state, width);
                assert!(!line.contains("namespace"), "{namespace:?} {width}: {line}");
                assert!(!line.contains("PID ns"), "{namespace:?} {width}: {line}");
            }
        }
    }
}
