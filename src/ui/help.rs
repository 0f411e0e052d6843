//! The help screen: keys, layers and how they add up.

use super::chart::CLIMB_MARK;
use super::strata::PARTIAL_GLYPH;
use super::theme::Theme;
use crate::app::State;
use crate::detect::Severity;
use crate::layers::Layer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

pub(crate) fn draw_help(frame: &mut Frame<'_>, area: Rect, state: &State, theme: Theme) {
    let head = |text: &'static str| Line::styled(text, theme.table_header());
    let mut lines = vec![
        head("Keys"),
        Line::raw("  q Ctrl-C quit · Esc back (closes a view; nothing on the main screen)"),
        Line::raw("  ↑↓ j PgUp PgDn Home End move · Tab focus processes/findings"),
        Line::raw(
            "  s sort key (used live frag cache sm cpu host-mem time pid gpu) · S reverse ▲▼",
        ),
        Line::raw(
            "    rows keep their order unless a value moves clearly (its 10-sample peak, ±5%)",
        ),
        Line::raw(
            "  k F9 signal the process (SIGINT/TERM/KILL, then confirm y); on a zombie_context",
        ),
        Line::raw("    finding: the processes still holding its /dev/nvidia<N> open"),
        Line::raw(
            "  g group the table by owner: launcher, pod, slurm, user (o in a replay); Enter on",
        ),
        Line::raw("    a group row: its sums, members and findings (Enter on one: its evidence)"),
        Line::raw("  a attach the allocator feed to the selected Python 3.14+ process without one"),
        Line::raw("    (strata attach, after y); why not, if it cannot work, in the footer"),
        Line::raw("  Enter: a process's reconciliation, or a finding's evidence"),
        Line::raw("  p pause/resume (samples are kept, within 64 MiB, and applied on resume)"),
        Line::raw("  Ctrl-Z suspend to the shell (fg brings strata back, repainted)"),
        Line::raw(
            "  r record: a prompt for the file (⏎ start, esc cancel); r again stops. Samples",
        ),
        Line::raw("    are written as they arrive, paused or not (zstd; .jsonl plain, .gz gzip)"),
        Line::raw("  v strata view: every layer of each device over time; ↑↓ pick a device"),
        Line::raw("    z + - zoom it through the history's tiers: 15m, 2h, 24h"),
        Line::raw("  R write a Markdown report of the instant shown (paused too) to"),
        Line::raw("    ./strata-report-<host>-<time>.md; the footer names it"),
        Line::raw("  ? this help (↑↓ scroll it)"),
        head("Replay (strata replay FILE)"),
        Line::raw("  p pause/resume the replay's clock · + - speed ×¼ … ×64 (in the strata view:"),
        Line::raw("    zoom) · ← → a minute back/on · g G the start/the end · Home End the list"),
        Line::raw("    a seek shows what playing through to it would: history and findings"),
        head("Process table"),
        Line::raw(
            "  STATE: the process's state in /proc (R running, S sleeping, D disk, Z zombie),",
        ),
        Line::raw(
            "    then its allocator feed: fed (fresh figures) · stale (older than 3 intervals:",
        ),
        Line::raw(
            "    shown, not combined) · waiting (not yet paired with NVML) · refused (failed a",
        ),
        Line::raw("    trust check) · badfeed (figures that contradict NVML) · nofeed (none)."),
        Line::raw("    gone: the PID has exited but NVML still lists it (a zombie context) ·"),
        Line::raw("    hidden: /proc hides it (hidepid) · foreign: another PID namespace"),
        Line::raw("  TREND 10m: NVML used, each cell the peak of a minute, scaled from the least"),
        Line::raw("    to the most shown (512 MiB at least), so a slow climb rises across it;"),
        Line::raw("    a flagged climb shows its rate and the window it was read over instead"),
        Line::raw("    (+636M/m 8m: 636 MiB a minute, read over 8 minutes; /m is per minute)"),
        head("Allocator feeds"),
        Line::raw("  NVML sees a process's memory as one number. A feed is strata's agent inside"),
        Line::raw("  the Python job reading its allocator (PyTorch, JAX, CuPy), which splits that"),
        Line::raw("  number into live tensors, cache, free split pieces and memory outside the"),
        Line::raw("  pool. Get one: strata run -- python train.py (or import strata_feed;"),
        Line::raw("  strata_feed.start()), or strata attach PID for a running Python 3.14+ job."),
        head("Marks"),
        Line::from(vec![
            Span::raw("  "),
            Span::styled(CLIMB_MARK.to_string(), theme.severity(Severity::Warning)),
            Span::raw(" where a flagged climb began (sparklines, strata view, evidence)"),
        ]),
        Line::raw("  16m ▁▂▃: a sparkline's window; each cell the peak of its share of it"),
        Line::raw("  ~ an estimated context · ≥ a lower bound (a process's share unknown)"),
        Line::raw(
            "  T C compute · G graphics · CG both · M MPS client; CPU% of one core; HMEM host",
        ),
        Line::raw("    memory (resident); TIME since the process started"),
        Line::from(vec![
            Span::raw("  "),
            Span::styled(PARTIAL_GLYPH.to_string(), theme.alert()),
            Span::raw(" strata view: bytes of a layer known only in part · blank: unknown"),
        ]),
        head("Per GPU and per MIG instance, at one instant"),
        Line::raw("  total = live + fragmented + cached + outside_pool + context"),
        Line::raw("          + unattributed + other + free"),
        Line::raw("  NVML used = context + outside_pool + reserved (a process with a feed)"),
        Line::raw("  reserved = live + fragmented + cached"),
        Line::raw("  n/a is unknown, never 0; a feed 3 intervals old is stale, not mixed in"),
        head("History"),
        Line::raw("  every sample for 15 min, then min/max/last to 2 h and 24 h; a process's"),
        Line::raw("  series cost what they hold, and go 900 samples after it does. All of it"),
        Line::raw("  keeps within a budget: past it, exited processes go first, then the reach"),
        Line::raw("  is thinned, then new processes get none. Now:"),
    ];
    let budget = state.pipeline.history.budget();
    lines.extend(
        budget
            .parts()
            .into_iter()
            .map(|p| Line::raw(format!("  · {p}"))),
    );
    lines.push(head("Layers"));
    for layer in Layer::ALL {
        lines.push(Line::from(vec![
            Span::raw("  "),
            Span::styled(layer.glyph().to_string().repeat(2), theme.layer(layer)),
            Span::raw(format!(" {:<13} {}", layer.name(), layer.meaning())),
        ]));
    }
    // The scroll stops where the last line reaches the bottom.
    let room = lines
        .len()
        .saturating_sub(area.height.saturating_sub(2) as usize);
    state.views.scroll_room.set(Some(room));
    let scroll = state.views.help_scroll.min(room);
    let help = Paragraph::new(lines)
        .scroll((scroll.min(usize::from(u16::MAX)) as u16, 0))
        .block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(theme.focused_border())
                .title(Line::styled(" Help ", theme.title())),
        );
    frame.render_widget(help, area);
}
