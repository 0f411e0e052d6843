//! `r` in the monitor: a prompt for the recording's name, then the header shows it until
//! `r` again. The writing itself is the event loop's ([`crate::record::live`]): the state
//! only asks for a start or a stop, and shows what the writer reports.

use super::{Notice, State};
use crate::units;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::path::PathBuf;

/// `r`: the recording of the monitor's samples, as the screen knows it (the writer is the
/// event loop's).
#[derive(Debug, Default)]
pub struct Recorder {
    /// The recording in progress, as its writer last reported it.
    pub(crate) recording: Option<RecordingShown>,
    /// The prompt for a recording's name, while open: it takes the keys.
    pub(crate) prompt: Option<RecordPrompt>,
    /// A start or stop for the event loop, which owns the writer.
    pub(crate) request: Option<RecordRequest>,
    /// Why the last recording stopped by itself (a write error), until the next `r`.
    pub(crate) failed: Option<String>,
}

/// The name being typed, pre-filled with a default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordPrompt {
    pub(crate) text: String,
}

/// A recording in progress, as the header shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordingShown {
    pub(crate) path: PathBuf,
    pub(crate) samples: u64,
    pub(crate) bytes: u64,
}

impl RecordingShown {
    /// The file's name (its last component), safe for the terminal.
    pub(crate) fn name(&self) -> String {
        let name = self
            .path
            .file_name()
            .unwrap_or_else(|| self.path.as_os_str())
            .to_string_lossy();
        crate::text::clean(&name).into_owned()
    }
}

/// What the state asks of the event loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordRequest {
    Start(PathBuf),
    Stop,
}

/// `strata-<host>-<YYYYmmdd-HHMMSS>.jsonl.zst` (UTC), the host reduced to characters safe in
/// a file name.
pub(crate) fn default_name(host: &str, unix_secs: f64) -> String {
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    let host = if host.is_empty() { "node".into() } else { host };
    let secs = unix_secs.max(0.0) as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "strata-{host}-{y:04}{m:02}{d:02}-{:02}{:02}{:02}.jsonl.zst",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

impl State {
    /// `r`: stop the recording in progress, or open the prompt for a new one.
    pub(super) fn record_key(&mut self) {
        if self.recorder.recording.is_some() {
            self.recorder.request = Some(RecordRequest::Stop);
            return;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let host = self
            .current
            .as_ref()
            .map_or("node", |o| o.sample.host.as_str());
        self.recorder.prompt = Some(RecordPrompt {
            text: default_name(host, now),
        });
    }

    /// A key while the prompt is open: typing edits the name, Enter starts, Esc cancels.
    pub(crate) fn prompt_key(&mut self, key: KeyEvent) {
        if key.kind == KeyEventKind::Release {
            return;
        }
        let Some(prompt) = self.recorder.prompt.as_mut() else {
            return;
        };
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('c') if ctrl => self.quit = true,
            KeyCode::Char('u') if ctrl => prompt.text.clear(),
            KeyCode::Esc => {
                self.recorder.prompt = None;
                self.notice = Some(Notice {
                    text: "recording cancelled".into(),
                    alert: false,
                });
            }
            KeyCode::Enter => {
                let text = prompt.text.trim().to_string();
                if text.is_empty() {
                    return;
                }
                self.recorder.prompt = None;
                self.recorder.request = Some(RecordRequest::Start(PathBuf::from(text)));
            }
            KeyCode::Backspace => {
                prompt.text.pop();
            }
            KeyCode::Char(c) if !ctrl && !c.is_control() && prompt.text.len() < 4096 => {
                prompt.text.push(c)
            }
            _ => {}
        }
    }

    /// The event loop started the recording.
    pub(crate) fn record_started(&mut self, path: PathBuf) {
        self.recorder.failed = None;
        self.recorder.recording = Some(RecordingShown {
            path,
            samples: 0,
            bytes: 0,
        });
    }

    /// The event loop could not start it (a bad path): said in the footer.
    pub(crate) fn record_refused(&mut self, line: String) {
        self.notice = Some(Notice {
            text: line,
            alert: true,
        });
    }

    /// The writer's totals so far.
    pub(crate) fn record_progress(&mut self, samples: u64, bytes: u64) {
        if let Some(r) = self.recorder.recording.as_mut() {
            r.samples = samples;
            r.bytes = bytes;
        }
    }

    /// A write failed: the recording has stopped; the monitor goes on. The header says so
    /// until the next `r`; the footer says why.
    pub(crate) fn record_write_failed(&mut self, line: String) {
        self.recorder.recording = None;
        self.recorder.failed = Some(line.clone());
        self.notice = Some(Notice {
            text: format!("recording stopped: {line}"),
            alert: true,
        });
    }

    /// `r` again: the file is finished.
    pub(crate) fn record_stopped(&mut self, samples: u64, bytes: u64, dropped: u64) {
        let Some(shown) = self.recorder.recording.take() else {
            return;
        };
        let dropped = match dropped {
            0 => String::new(),
            n => format!(", {n} dropped (the disk was behind)"),
        };
        let path = crate::text::clean(&shown.path.display().to_string()).into_owned();
        self.notice = Some(Notice {
            text: format!(
                "saved {path}: {samples} sample{}, {}{dropped}",
                if samples == 1 { "" } else { "s" },
                units::bytes(bytes)
            ),
            alert: false,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::{key_action, Action};
    use crate::pipeline::Pipeline;

    #[test]
    fn the_default_name_says_host_and_utc_time() {
        // 2026-11-29 15:02:45 UTC.
        assert_eq!(
            default_name("gpu-node-7", 1_795_964_565.0),
            "strata-gpu-node-7-20261129-150245.jsonl.zst"
        );
        assert_eq!(
            default_name("evil/\x1b[2J host", 0.0),
            "strata-evil___2J_host-19700101-000000.jsonl.zst"
        );
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    }

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn r_prompts_enter_starts_r_stops_and_esc_cancels() {
        let mut s = State::new(Pipeline::new(None), "demo ×10".into(), 1.0);
        s.setup.demo = true;
        assert_eq!(key_action(key(KeyCode::Char('r'))), Some(Action::Record));
        s.apply_action(Action::Record);
        let prompt = s.recorder.prompt.clone().expect("prompt");
        assert!(prompt.text.starts_with("strata-node-"), "{prompt:?}");
        s.prompt_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
        // `q` and `r` in the prompt are letters of the name, not quit or stop.
        for c in "a.zsqr".chars() {
            s.prompt_key(key(KeyCode::Char(c)));
        }
        assert!(!s.quit);
        s.prompt_key(key(KeyCode::Backspace));
        s.prompt_key(key(KeyCode::Backspace));
        s.prompt_key(key(KeyCode::Char('t')));
        s.prompt_key(key(KeyCode::Enter));
        assert_eq!(s.recorder.prompt, None);
        assert_eq!(
            s.recorder.request.take(),
            Some(RecordRequest::Start("a.zst".into()))
        );
        s.record_started("a.zst".into());
        s.record_progress(3, 2048);
        s.apply_action(Action::Record);
        assert_eq!(s.recorder.request.take(), Some(RecordRequest::Stop));
        s.record_stopped(3, 2048, 0);
        assert_eq!(s.recorder.recording, None);
        let notice = s.notice.clone().expect("notice").text;
        assert_eq!(notice, "saved a.zst: 3 samples, 2.00 KiB");

        s.apply_action(Action::Record);
        s.prompt_key(key(KeyCode::Esc));
        assert_eq!(s.recorder.prompt, None);
        assert_eq!(s.recorder.request, None);
    }

    #[test]
    fn a_write_error_stops_the_recording_and_says_why() {
        let mut s = State::new(Pipeline::new(None), "demo ×10".into(), 1.0);
        s.setup.demo = true;
        s.record_started("x.zst".into());
        s.record_write_failed(
            "cannot write the recording x.zst: disk full (hint: free space)".into(),
        );
        assert_eq!(s.recorder.recording, None);
        assert!(s.recorder.failed.is_some());
        let notice = s.notice.clone().expect("notice");
        assert!(
            notice.alert && notice.text.contains("disk full"),
            "{notice:?}"
        );
        // `r` then opens the prompt for a new one.
        s.apply_action(Action::Record);
        assert!(s.recorder.prompt.is_some());
    }
}
