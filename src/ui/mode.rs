//! What the header says of the monitor's state, long and short: live, stale or stalled,
//! paused or catching up, a replay's position and speed, a recording in progress.

use crate::app::{Freshness, State};
use crate::units;

/// The monitor's state, long and short: paused, recording, stale (a poll overdue, or failed:
/// the data's age, and how long the poll has been running), or live.
pub(super) fn mode(state: &State) -> (String, String) {
    let (long, short) = data_mode(state);
    // A recording (or one that stopped on an error) is said beside every state, at every
    // width: the long form names the file, the short one its size.
    match (&state.recorder.recording, &state.recorder.failed) {
        (Some(rec), _) => {
            let size = units::bytes(rec.bytes);
            let name = rec.name();
            let long = if long == "● live" {
                format!("● rec {name} {size}")
            } else {
                format!("{long} · ● rec {name} {size}")
            };
            // Short: the name's start, enough to tell two recordings apart.
            let brief: String = if name.chars().count() > 20 {
                name.chars().take(19).chain(['…']).collect()
            } else {
                name.clone()
            };
            let size = units::short_bytes(rec.bytes);
            let short = if short == "● live" {
                format!("● rec {brief} {size}")
            } else {
                format!("{short} ● rec {brief} {size}")
            };
            (long, short)
        }
        (None, Some(_)) => (
            format!("{long} · ✗ rec stopped (write error)"),
            format!("{short} ✗ rec"),
        ),
        (None, None) => (long, short),
    }
}

/// The data's state alone: paused, catching up, stale, or live.
fn data_mode(state: &State) -> (String, String) {
    if let Some(words) = replay_words(state) {
        return words;
    }
    if let Some(words) = pause_words(state) {
        return words;
    }
    let age = |age: Option<std::time::Duration>| match age {
        Some(age) => format!("stale {}", seconds(age)),
        None => "no data yet".to_string(),
    };
    match state.polls.freshness {
        Freshness::Stalled {
            data_age,
            poll_running,
        } => {
            let source = match state.setup.source_label.split_whitespace().next() {
                Some("nvml") | None => "NVML".to_string(),
                Some(word) => word.to_string(),
            };
            let running = seconds(poll_running);
            (
                format!("◌ {} · {source} poll running {running}", age(data_age)),
                format!("◌ {} · poll {running}", age(data_age)),
            )
        }
        Freshness::Failed { data_age } => (
            format!("◌ {} · last poll failed", age(data_age)),
            format!("◌ {} · poll failed", age(data_age)),
        ),
        Freshness::Live => ("● live".to_string(), "● live".to_string()),
    }
}

/// A replay: where it is in the recording, its speed, whether paused, a seek under way, and
/// what reading the recording skipped, long and short. `None` when not a replay.
fn replay_words(state: &State) -> Option<(String, String)> {
    use crate::replay::SeekTarget;
    let status = &state.replay.as_ref()?.status;
    let time = state.current.as_ref().map(|o| o.sample.time);
    let position = time.map_or("n/a".into(), |t| units::duration(t - status.first_time));
    let length = status
        .last_time
        .map_or("?".into(), |l| units::duration(l - status.first_time));
    // The whole file's first reading, under way for more than a second: how far it is.
    let (reading_long, reading_short) = match (status.last_time, status.indexing) {
        (None, Some((read, Some(total)))) if total > 0 => {
            let percent = (read as f64 / total as f64 * 100.0).min(100.0).floor();
            (
                format!(
                    " (reading {} of {}, {percent:.0}%)",
                    units::bytes(read),
                    units::bytes(total)
                ),
                format!(" {percent:.0}%"),
            )
        }
        (None, Some((read, _))) => (format!(" (reading {})", units::bytes(read)), String::new()),
        _ => (String::new(), String::new()),
    };
    let clock = time.map_or("--:--:--".into(), units::clock);
    let speed = match status.speed {
        s if s >= 1.0 => format!("×{s}"),
        0.5 => "×½".to_string(),
        0.25 => "×¼".to_string(),
        s => format!("×{s}"),
    };
    let state_word = match (&status.seeking, status.paused, status.ended) {
        (Some((target, progress)), _, _) => {
            let to = match target {
                SeekTarget::At(t) if t.is_finite() => units::duration(t - status.first_time),
                SeekTarget::At(_) => "start".into(),
                SeekTarget::End => "end".into(),
            };
            format!(" ⟳ seeking {to} {:.0}%", progress * 100.0)
        }
        (None, true, _) => " ‖ paused".into(),
        (None, false, true) => " ■ end".into(),
        (None, false, false) => String::new(),
    };
    let reading = &status.reading;
    let mut skipped_long = String::new();
    let mut skipped_short = String::new();
    if reading.bad_lines > 0 {
        let plural = if reading.bad_lines == 1 { "" } else { "s" };
        let last = reading.last_bad_line.unwrap_or(0);
        skipped_long += &format!(
            " · {} bad line{plural} (last: line {last})",
            reading.bad_lines
        );
        skipped_short += &format!(" · {} bad (l.{last})", reading.bad_lines);
    }
    if reading.out_of_order > 0 {
        skipped_long += &format!(" · {} out of order", reading.out_of_order);
        skipped_short += &format!(" · {} unordered", reading.out_of_order);
    }
    if let Some(at) = reading.last_corrupt_at {
        let times = match reading.corrupt {
            1 => String::new(),
            n => format!(" ({n} times)"),
        };
        skipped_long += &format!(" · corrupt at byte {at}{times}");
        skipped_short += " · corrupt";
    }
    if reading.truncated {
        skipped_long += " · last line cut";
    }
    Some((
        format!(
            "replay {clock} UTC · {position} of {length}{reading_long} · {speed}{state_word}{skipped_long}"
        ),
        format!("▶ {position}/{length}{reading_short} {speed}{state_word}{skipped_short}"),
    ))
}

/// Paused: how many samples wait, in how many bytes, and how many were dropped to fit the
/// budget (one in how many kept). Resumed with samples still waiting: how many are left.
/// `None` when live.
fn pause_words(state: &State) -> Option<(String, String)> {
    let queue = &state.pause.queue;
    let dropped = match queue.dropped() {
        0 => String::new(),
        n => format!(", {n} dropped"),
    };
    if state.pause.paused {
        let kept = match queue.stride() {
            1 => String::new(),
            n => format!(", 1 in {n} kept"),
        };
        let (count, size) = (queue.len(), units::bytes(queue.bytes()));
        let budget = units::bytes(queue.budget());
        return Some((
            format!("‖ paused · {count} queued ({size} of {budget}{dropped}{kept})"),
            format!("‖ paused {count} queued{dropped}"),
        ));
    }
    if state.catching_up() {
        let count = queue.len();
        return Some((
            format!("⟳ catching up {count} samples{dropped}"),
            format!("⟳ catching up {count}"),
        ));
    }
    None
}

/// A duration in whole seconds, minutes past two of them: `9s`, `4m05s`, `2h03m`.
fn seconds(duration: std::time::Duration) -> String {
    let s = duration.as_secs();
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::seconds;
    use std::time::Duration;

    #[test]
    fn durations_read_at_a_glance() {
        assert_eq!(seconds(Duration::from_millis(9_900)), "9s");
        assert_eq!(seconds(Duration::from_secs(119)), "119s");
        assert_eq!(seconds(Duration::from_secs(245)), "4m05s");
        assert_eq!(seconds(Duration::from_secs(7380)), "2h03m");
    }
}
