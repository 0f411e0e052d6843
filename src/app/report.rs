//! `R`: the Markdown report of the instant on screen, written to a file.

use super::{Notice, State};
use std::path::Path;

impl State {
    /// Writes the report of the instant shown (the one held while paused) into
    /// [`Setup::report_dir`](super::Setup::report_dir), and says where in the footer; a
    /// failure is one line there too.
    pub(super) fn write_report(&mut self) {
        let Some(observed) = &self.current else {
            self.notice = Some(Notice {
                text: "no report: no sample yet".into(),
                alert: true,
            });
            return;
        };
        let demo = self.setup.demo;
        let name = crate::report::file_name(&observed.sample);
        let path = self.setup.report_dir.join(&name);
        let shown = Path::new(".").join(&name);
        let shown = if self.setup.report_dir == Path::new(".") {
            shown.display().to_string()
        } else {
            path.display().to_string()
        };
        // The report, and its chart beside it.
        let written = crate::report::chart::write_report(
            &self.setup.report_dir,
            observed,
            &self.pipeline.history,
            demo,
        );
        self.notice = Some(match written {
            Ok(_) => Notice {
                text: format!("report written to {}", crate::text::clean(&shown)),
                alert: false,
            },
            Err(e) => Notice {
                text: format!(
                    "report not written to {}: {e} (hint: start strata in a directory you can write to)",
                    crate::text::clean(&shown)
                ),
                alert: true,
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::{key_action, Action};
    use crate::pipeline::Pipeline;
    use crate::source::demo::node_at;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn demo_state(dir: &Path) -> State {
        let mut s = State::new(Pipeline::new(None), "demo ×10".into(), 1.0);
        s.setup.demo = true;
        s.setup.report_dir = dir.to_path_buf();
        s
    }

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("strata-report-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn capital_r_is_the_report_key() {
        let key = KeyEvent::new(KeyCode::Char('R'), KeyModifiers::SHIFT);
        assert_eq!(key_action(key), Some(Action::Report));
        let key = KeyEvent::new(KeyCode::Char('r'), KeyModifiers::NONE);
        assert_ne!(key_action(key), Some(Action::Report));
    }

    /// Paused, with later samples queued: the report is of the instant on screen, and the
    /// footer names its file.
    #[test]
    fn r_writes_the_report_of_the_instant_shown_while_paused() {
        let dir = temp_dir("paused");
        let mut s = demo_state(&dir);
        s.on_sample(node_at(0, 895.0, 10.0));
        s.on_sample(node_at(0, 905.0, 10.0));
        s.apply_action(Action::TogglePause);
        s.on_sample(node_at(0, 915.0, 10.0));
        s.apply_action(Action::Report);
        let name = "strata-report-demo-node-20260101-091505.md";
        let written = std::fs::read_to_string(dir.join(name)).expect("the report file");
        let observed = s.current.as_ref().expect("shown");
        let report = crate::report::markdown(observed, &s.pipeline.history, true);
        assert!(
            written.starts_with(&report),
            "the report, then its chart's link"
        );
        let svg = "strata-report-demo-node-20260101-091505.svg";
        assert!(
            written[report.len()..].contains(&format!("]({svg})")),
            "{written}"
        );
        assert!(std::fs::read_to_string(dir.join(svg))
            .expect("the chart")
            .starts_with("<svg"));
        assert!(
            written.contains("at 2026-01-01 09:15:05.0 UTC"),
            "{written}"
        );
        assert!(written.contains("the demo's story 15m05s"), "{written}");
        let notice = s.notice.as_ref().expect("a notice");
        assert!(!notice.alert);
        assert!(notice.text.contains(name), "{}", notice.text);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_that_cannot_be_written_is_one_line_in_the_footer() {
        let dir = temp_dir("gone");
        let mut s = demo_state(&dir.join("no-such-dir"));
        s.on_sample(node_at(0, 905.0, 10.0));
        s.apply_action(Action::Report);
        let notice = s.notice.as_ref().expect("a notice");
        assert!(notice.alert);
        assert!(
            notice.text.starts_with("report not written"),
            "{}",
            notice.text
        );
        assert!(notice.text.contains("hint:"), "{}", notice.text);
        assert!(!notice.text.contains('\n'));
        assert!(!s.quit);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn before_any_sample_there_is_nothing_to_report() {
        let dir = temp_dir("empty");
        let mut s = demo_state(&dir);
        s.apply_action(Action::Report);
        assert!(s.notice.as_ref().is_some_and(|n| n.alert));
        assert_eq!(std::fs::read_dir(&dir).map(|d| d.count()).ok(), Some(0));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
