//! The help screen: keys, layers and how they add up. Its text is wrapped to the screen at
//! word boundaries (an entry goes on under itself, indented), in two columns where the screen
//! is wide enough, and scrolls where it is not, saying when more is below or above.

use super::chart::CLIMB_MARK;
use super::strata::PARTIAL_GLYPH;
use super::theme::Theme;
use crate::app::State;
use crate::detect::Severity;
use crate::layers::Layer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders};
use ratatui::Frame;

/// One piece of the help: a section's head, or an entry (its key, then what it does).
enum Piece {
    Head(&'static str),
    /// `key` is drawn as given (styled where it is a glyph), then `text` wrapped after it.
    Entry {
        key: Vec<Span<'static>>,
        text: String,
    },
}

fn entry(key: impl Into<std::borrow::Cow<'static, str>>, text: &str) -> Piece {
    Piece::Entry {
        key: vec![Span::raw(key)],
        text: text.into(),
    }
}

/// Text with no key of its own.
fn para(text: &str) -> Piece {
    Piece::Entry {
        key: Vec::new(),
        text: text.into(),
    }
}

/// The help's text, in order: every word the screen shows.
fn pieces(state: &State, theme: Theme) -> Vec<Piece> {
    let mut pieces =
        vec![
        Piece::Head("Keys"),
        entry("q Ctrl-C", "quit · Esc back (closes a view; nothing on the main screen)"),
        entry(
            "↑↓ k j PgUp PgDn Home End",
            "move (k up, j down, as in vim) · Tab focus processes/findings",
        ),
        entry(
            "Tab",
            "the findings panel: ↑↓ select a finding, Enter its evidence; where they do not all \
             fit, its last line says how many more there are",
        ),
        entry(
            "s",
            &format!(
                "sort key ({}) · S reverse ▲▼; rows keep their order unless a value moves \
                 clearly (its 10-sample peak, ±5%)",
                sort_keys()
            ),
        ),
        entry(
            "K F9",
            "signal the process (SIGINT/TERM/KILL, then confirm y); on a zombie_context \
             finding: the processes still holding its /dev/nvidia<N> open",
        ),
        entry(
            "g",
            "group the table by owner: launcher, pod, slurm, user (o in a replay); Enter on a \
             group row: its sums, members and findings (Enter on one: its evidence)",
        ),
        entry(
            "a",
            "attach the allocator feed to the selected Python 3.14+ process without one \
             (strata attach, after y); why not, if it cannot work, in the footer",
        ),
        entry(
            "w",
            "sites: which lines of a fed torch job's code hold its memory. Its agent records \
             the allocator's history for 60 s (Python stacks; put back as the job had it), then \
             the view shows what grew and what is live by site, and the segment map; w there \
             asks again",
        ),
        entry("Enter", "a process's reconciliation, or a finding's evidence"),
        entry(
            "p",
            "pause/resume (samples are kept, within 64 MiB, and applied on resume)",
        ),
        entry(
            "Ctrl-Z",
            "suspend to the shell (fg brings strata back, repainted)",
        ),
        entry(
            "r",
            "record: a prompt for the file (⏎ start, esc cancel); r again stops. Samples are \
             written as they arrive, paused or not (zstd; .jsonl plain, .gz gzip)",
        ),
        entry(
            "v",
            "strata view: every layer of each device over time; ↑↓ pick a device",
        ),
        entry("z + -", "zoom it through the history's tiers: 15m, 2h, 24h"),
        entry(
            "R",
            "write a Markdown report of the instant shown (paused too) to \
             ./strata-report-<host>-<time>.md; the footer names it",
        ),
        entry("?", "this help (↑↓ j k PgUp PgDn scroll it)"),
        Piece::Head("Replay (strata replay FILE)"),
        entry(
            "p",
            "pause/resume the replay's clock · + - speed ×¼ … ×64 (in the strata view: zoom) · \
             ← → a minute back/on · g G the start/the end · Home End the list",
        ),
        para("a seek shows what playing through to it would: history and findings"),
        Piece::Head("Process table"),
        entry(
            "STATE:",
            "the process's state in /proc (R running, S sleeping, D disk, Z zombie), then its \
             allocator feed: fed (fresh figures) · stale (older than 3 intervals: shown, not \
             combined) · waiting (not yet paired with NVML) · refused (failed a trust check) · \
             badfeed (figures that contradict NVML) · nofeed (none). gone: the PID has exited \
             but NVML still lists it (a zombie context) · hidden: /proc hides it (hidepid) · \
             foreign: another PID namespace",
        ),
        entry(
            "USED:",
            "used: the memory NVML says the process holds (usedGpuMemory); a GPU's used is \
             NVML's too (total less free). Every screen, the report and the docs call it used",
        ),
        entry(
            layer_heads(),
            "its layers, each head the layer's name or its one short form in capitals (the \
             Layers, below); reserved, the allocator's pool, is live + fragmented + cached",
        ),
        entry(
            "HEADROOM:",
            "headroom: how far a fed process's peak of live tensors can still grow: free + \
             reserved - fragmented - that peak (negative: it no longer fits)",
        ),
        entry(
            "TREND 10m:",
            "used, each cell the peak of a minute, scaled from the least to the most \
             shown (512 MiB at least), so a slow climb rises across it; a flagged climb shows \
             its rate and the window it was read over instead (+636M/min 8m: 636 MiB a minute, \
             read over 8 minutes)",
        ),
        Piece::Head("Allocator feeds"),
        para(
            "NVML sees a process's memory as one number. A feed is strata's agent inside the \
             Python job reading its allocator (PyTorch, JAX, CuPy), which splits that number \
             into its layers: live, fragmented, cached and outside_pool (below). Get one: \
             strata run -- python train.py (or import strata_feed; strata_feed.start()), or \
             strata attach PID for a running Python 3.14+ job.",
        ),
        Piece::Head("Marks"),
        Piece::Entry {
            key: vec![Span::styled(
                CLIMB_MARK.to_string(),
                theme.severity(Severity::Warning),
            )],
            text: "where a flagged climb began (sparklines, strata view, evidence)".into(),
        },
        entry(
            "16m ▁▂▃:",
            "a sparkline's window; each cell the peak of its share of it",
        ),
        entry(
            "~",
            "an estimate: a context read from paired samples, at most that much (~856M)",
        ),
        entry(
            "≥",
            "a lower bound, at least this: outside_pool beside an estimated context, a sum \
             with a member's share unknown (≥0B)",
        ),
        entry(
            "≤",
            "an upper bound, at most this: a context not yet split from outside_pool, other \
             while the process list cannot be read",
        ),
        entry("n/a", "unknown: not reported, or not readable here; never 0"),
        entry("…", "cut to fit the width (ASCII: ~ or ...); the detail view has it whole"),
        entry(
            "T",
            "C compute · G graphics · CG both · M MPS client; CPU% of one core; HMEM host \
             memory (resident); TIME since the process started",
        ),
        Piece::Entry {
            key: vec![Span::styled(PARTIAL_GLYPH.to_string(), theme.alert())],
            text: "strata view: bytes of a layer known only in part · blank: unknown".into(),
        },
        Piece::Head("Clocks and intervals"),
        para(
            "Times are wall-clock UTC (09:14:05 UTC) in every view, the report and the JSON's \
             prose; the demo's header shows its story time instead, labelled story (story \
             15m05s: since its story began). Durations are 42s, 3m07s, 2h05m; the sampling \
             interval is every 1s, 0.5s; rates are per minute (/min).",
        ),
        Piece::Head("Per GPU and per MIG instance, at one instant"),
        para(
            "total = live + fragmented + cached + outside_pool + context + unattributed + \
             other + free",
        ),
        para("used = context + outside_pool + reserved (a process with a feed)"),
        para("reserved = live + fragmented + cached"),
        para("n/a is unknown, never 0; a feed 3 intervals old is stale, not mixed in"),
        Piece::Head("History"),
        para(
            "every sample for 15 min, then min/max/last to 2 h and 24 h; a process's series \
             cost what they hold, and go 900 samples after it does. All of it keeps within a \
             budget: past it, exited processes go first, then the reach is thinned, then new \
             processes get none. Now:",
        ),
    ];
    let budget = state.pipeline.history.budget();
    pieces.extend(budget.parts().into_iter().map(|p| Piece::Entry {
        key: vec![Span::raw("·")],
        text: p,
    }));
    pieces.push(Piece::Head("Layers"));
    for layer in Layer::ALL {
        pieces.push(Piece::Entry {
            key: vec![
                Span::styled(layer.glyph().to_string().repeat(2), theme.layer(layer)),
                Span::raw(format!(" {:<13}", layer.name())),
            ],
            text: layer.meaning().into(),
        });
    }
    pieces
}

/// The sort keys in the order `s` steps through them, as the footer names them.
fn sort_keys() -> String {
    crate::present::sort::SortKey::CYCLE
        .iter()
        .map(|k| k.label())
        .collect::<Vec<_>>()
        .join(" · ")
}

/// The process table's layer columns, as their heads spell them.
fn layer_heads() -> String {
    let heads = [
        Layer::Live,
        Layer::Cached,
        Layer::Fragmented,
        Layer::Context,
        Layer::OutsidePool,
    ]
    .map(Layer::head);
    format!("{}:", heads.join(" "))
}

/// Where an entry's text goes on, under its first line.
const HANG: usize = 4;
/// The gap between two columns.
const GUTTER: usize = 2;
/// The narrowest a column may be: where two do not fit, one.
const COLUMN_LEAST: usize = 74;

/// Words of `text` in lines of `first` cells, then of `rest`; a word longer than a line is
/// cut across lines (none of the help's is).
fn wrap_hanging(text: &str, first: usize, rest: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let room = if lines.is_empty() { first } else { rest }.max(1);
        let used = line.chars().count();
        if used > 0 && used + 1 + word.chars().count() > room {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
        // A word wider than a whole line: cut it there.
        loop {
            let room = if lines.is_empty() { first } else { rest }.max(1);
            if line.chars().count() <= room {
                break;
            }
            let head: String = line.chars().take(room).collect();
            let tail: String = line.chars().skip(room).collect();
            lines.push(head);
            line = tail;
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// A section: its lines at `width`, wrapped at words.
fn section_lines(pieces: &[Piece], width: usize, theme: Theme) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Head(text) => lines.push(Line::styled(*text, theme.table_header())),
            Piece::Entry { key, text } => {
                let key_width: usize = key.iter().map(Span::width).sum();
                let lead = if key_width == 0 { 2 } else { 2 + key_width + 1 };
                let wrapped =
                    wrap_hanging(text, width.saturating_sub(lead), width.saturating_sub(HANG));
                for (i, part) in wrapped.into_iter().enumerate() {
                    let mut spans = Vec::new();
                    if i == 0 {
                        spans.push(Span::raw("  "));
                        if key_width > 0 {
                            spans.extend(key.iter().cloned());
                            spans.push(Span::raw(" "));
                        }
                    } else {
                        spans.push(Span::raw(" ".repeat(HANG)));
                    }
                    spans.push(Span::raw(part));
                    lines.push(Line::from(spans));
                }
            }
        }
    }
    lines
}

/// The help's columns at `width` inside the border: one, or two where each is at least
/// [`COLUMN_LEAST`] wide, split between sections so that the longer is as short as can be.
fn columns(state: &State, width: usize, theme: Theme) -> Vec<Vec<Line<'static>>> {
    let pieces = pieces(state, theme);
    // Sections: each head with the entries under it.
    let mut sections: Vec<&[Piece]> = Vec::new();
    let mut start = 0;
    for (i, piece) in pieces.iter().enumerate() {
        if matches!(piece, Piece::Head(_)) && i > start {
            sections.push(&pieces[start..i]);
            start = i;
        }
    }
    sections.push(&pieces[start..]);
    if width < 2 * COLUMN_LEAST + GUTTER {
        return vec![sections
            .iter()
            .flat_map(|s| section_lines(s, width, theme))
            .collect()];
    }
    let column = (width - GUTTER) / 2;
    let laid: Vec<Vec<Line<'static>>> = sections
        .iter()
        .map(|s| section_lines(s, column, theme))
        .collect();
    let total: usize = laid.iter().map(Vec::len).sum();
    let split = (0..=laid.len())
        .min_by_key(|&k| {
            let left: usize = laid[..k].iter().map(Vec::len).sum();
            left.max(total - left)
        })
        .unwrap_or(laid.len());
    let (left, right) = laid.split_at(split);
    vec![left.concat(), right.concat()]
}

pub(crate) fn draw_help(frame: &mut Frame<'_>, area: Rect, state: &State, theme: Theme) {
    let inner_width = area.width.saturating_sub(2) as usize;
    let columns = columns(state, inner_width, theme);
    let height = area.height.saturating_sub(2) as usize;
    let longest = columns.iter().map(Vec::len).max().unwrap_or(0);
    // The scroll stops where the last line reaches the bottom.
    let room = longest.saturating_sub(height);
    state.views.scroll_room.set(Some(room));
    let scroll = state.views.help_scroll.min(room);
    let mut block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.focused_border())
        .title(Line::styled(" Help ", theme.title()));
    if scroll > 0 {
        block = block.title_top(
            Line::styled(format!(" ↑ {scroll} lines above: k PgUp "), theme.dim()).right_aligned(),
        );
    }
    if scroll < room {
        block = block.title_bottom(
            Line::styled(
                format!(" ↓ {} more lines below: j PgDn ", room - scroll),
                theme.title(),
            )
            .right_aligned(),
        );
    }
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let count = columns.len().max(1);
    let column_width = if count > 1 {
        (inner.width as usize - GUTTER) / 2
    } else {
        inner.width as usize
    };
    for (i, lines) in columns.iter().enumerate() {
        let x = inner.x + (i * (column_width + GUTTER)) as u16;
        let rect = Rect {
            x,
            width: (column_width as u16).min(inner.right().saturating_sub(x)),
            ..inner
        };
        let shown: Vec<Line<'static>> = lines.iter().skip(scroll).take(height).cloned().collect();
        super::widgets::put_lines(frame, rect, &shown);
    }
}
