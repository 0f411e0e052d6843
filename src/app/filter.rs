//! `/`: the process table filtered by PID, user, command, owner or GPU. Plain words match any
//! of those fields (case-insensitive substring); `pid:`, `user:`, `cmd:`, `owner:` and `gpu:`
//! restrict a word to one field; every term must match. The filter hides rows of the table
//! only: the GPU panels, the groups' sums and the findings stay whole, and the table's title
//! says how many processes are shown of how many there are.

use super::State;
use crate::accounting::GroupBy;
use crate::sample::{NodeSample, ProcessSample};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// The longest filter that can be typed: a prompt, not a document.
const MOST_CHARS: usize = 256;

/// One term of a filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Term {
    /// A plain word, lowercased: any field may hold it.
    Any(String),
    /// `pid:N`: this process exactly.
    Pid(u32),
    /// `user:NAME`, lowercased: a substring of the user.
    User(String),
    /// `cmd:TEXT`, lowercased: a substring of the command line.
    Command(String),
    /// `owner:TEXT`, lowercased: a substring of the owner's names (job, pod, container,
    /// unit, launcher).
    Owner(String),
    /// `gpu:N` or `gpu:UUID-PREFIX`.
    Gpu(GpuTerm),
}

/// Which GPU a `gpu:` term names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GpuTerm {
    /// Its index (a MIG instance's processes are on its GPU's index).
    Index(u32),
    /// A prefix of its UUID or of its MIG instance's, or its place (`0:3g.40gb`),
    /// lowercased; the UUID's `GPU-`/`MIG-` may be left out.
    Named(String),
}

/// The fields a term may name, as the error's hint lists them.
const FIELDS: &str = "pid, user, cmd, owner, gpu";

/// Parses a filter: whitespace separates terms, double quotes keep spaces in one
/// (`owner:"slurm 81234"`). An empty text is the empty filter, which matches everything.
pub(crate) fn parse(text: &str) -> Result<Vec<Term>, String> {
    words(text).iter().map(|w| term(w)).collect()
}

/// The words of `text`: split at whitespace outside double quotes, the quotes dropped.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut started = false;
    for c in text.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            c if c.is_whitespace() && !quoted => {
                if started {
                    out.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        out.push(word);
    }
    out
}

fn term(word: &str) -> Result<Term, String> {
    let Some((field, value)) = word.split_once(':') else {
        return Ok(Term::Any(word.to_lowercase()));
    };
    let value_lower = value.to_lowercase();
    let field_lower = field.to_lowercase();
    if value.is_empty()
        && matches!(
            field_lower.as_str(),
            "pid" | "user" | "cmd" | "command" | "owner" | "gpu"
        )
    {
        return Err(format!("`{field}:` needs a value after the colon"));
    }
    match field_lower.as_str() {
        "pid" => parse_pid(value).map(Term::Pid),
        "user" => Ok(Term::User(value_lower)),
        "cmd" | "command" => Ok(Term::Command(value_lower)),
        "owner" => Ok(Term::Owner(value_lower)),
        "gpu" => parse_gpu(value).map(Term::Gpu),
        _ => Err(format!(
            "`{field}:` is not a field ({FIELDS}); cmd:{word} finds a command with a colon"
        )),
    }
}

/// A PID: a whole number above 0.
fn parse_pid(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(pid) if pid > 0 => Ok(pid),
        _ => Err(format!(
            "`{text}` is not a PID: a whole number from 1 to {}",
            u32::MAX
        )),
    }
}

/// A GPU: its index (`0`), a prefix of its UUID (`GPU-5f2a`, `5f2a`), or a MIG place
/// (`0:3g.40gb`).
fn parse_gpu(text: &str) -> Result<GpuTerm, String> {
    if text.is_empty() {
        return Err("a GPU is its index (0) or a prefix of its UUID (GPU-5f2a)".into());
    }
    if let Ok(index) = text.parse::<u32>() {
        return Ok(GpuTerm::Index(index));
    }
    if text.starts_with(['-', '+']) || text.chars().any(char::is_whitespace) {
        return Err(format!(
            "`{text}` is not a GPU: its index (0) or a prefix of its UUID (GPU-5f2a)"
        ));
    }
    Ok(GpuTerm::Named(text.to_lowercase()))
}

/// What a process row is matched on: its fields as the table knows them.
pub(crate) struct Subject<'a> {
    pub(crate) process: &'a ProcessSample,
    /// Where it runs, as the GPU column says: `0`, `3:3g.40gb`.
    pub(crate) place: &'a str,
    /// Its GPU's index; `None` when the sample does not place it.
    pub(crate) gpu_index: Option<u32>,
    /// Its GPU's UUID, when it runs on a MIG instance (whose UUID is `device_uuid`).
    pub(crate) parent_uuid: Option<&'a str>,
}

impl<'a> Subject<'a> {
    /// The subject of `process` in `sample`.
    pub(crate) fn of(sample: &'a NodeSample, process: &'a ProcessSample, place: &'a str) -> Self {
        let located = sample.locate(&process.device_uuid);
        Subject {
            process,
            place,
            gpu_index: located.map(|(gpu, _)| gpu.index),
            parent_uuid: located
                .filter(|(_, mig)| mig.is_some())
                .map(|(gpu, _)| gpu.uuid.as_str()),
        }
    }

    /// The owner's names, lowercased: what `g` groups it by, and the short form of its
    /// owner (`pod train/llama-7b-0`, `slurm 81234.0`, `unit train.service`).
    fn owners(&self) -> Vec<String> {
        let mut names: Vec<String> = [GroupBy::Launcher, GroupBy::Pod, GroupBy::Slurm]
            .into_iter()
            .filter_map(|by| by.key(self.process))
            .collect();
        if let Some(owner) = self.process.owner.as_deref() {
            names.extend(owner.short());
            names.extend(owner.unit.iter().map(|u| format!("unit {u}")));
        }
        names.iter().map(|n| n.to_lowercase()).collect()
    }

    fn user_has(&self, needle: &str) -> bool {
        self.process
            .user
            .as_deref()
            .is_some_and(|u| u.to_lowercase().contains(needle))
    }

    fn command_has(&self, needle: &str) -> bool {
        self.process
            .command
            .as_deref()
            .is_some_and(|c| c.to_lowercase().contains(needle))
    }

    fn owner_has(&self, needle: &str) -> bool {
        self.owners().iter().any(|o| o.contains(needle))
    }

    fn on_gpu(&self, gpu: &GpuTerm) -> bool {
        match gpu {
            GpuTerm::Index(index) => self.gpu_index == Some(*index),
            GpuTerm::Named(name) => {
                let uuid_starts = |uuid: &str| {
                    let uuid = uuid.to_lowercase();
                    let bare = uuid
                        .strip_prefix("gpu-")
                        .or_else(|| uuid.strip_prefix("mig-"))
                        .unwrap_or(&uuid);
                    uuid.starts_with(name.as_str()) || bare.starts_with(name.as_str())
                };
                self.place.to_lowercase() == *name
                    || uuid_starts(&self.process.device_uuid)
                    || self.parent_uuid.is_some_and(uuid_starts)
            }
        }
    }

    /// Whether this process holds the term.
    pub(crate) fn matches(&self, term: &Term) -> bool {
        match term {
            Term::Pid(pid) => self.process.pid == *pid,
            Term::User(name) => self.user_has(name),
            Term::Command(text) => self.command_has(text),
            Term::Owner(text) => self.owner_has(text),
            Term::Gpu(gpu) => self.on_gpu(gpu),
            Term::Any(word) => {
                self.process.pid.to_string().contains(word.as_str())
                    || self.user_has(word)
                    || self.command_has(word)
                    || self.owner_has(word)
                    || self.on_gpu(&GpuTerm::Named(word.clone()))
            }
        }
    }

    /// Whether this process holds every term.
    pub(crate) fn matches_all(&self, terms: &[Term]) -> bool {
        terms.iter().all(|t| self.matches(t))
    }
}

/// The process table's filter: the text as typed, the terms in force, and the prompt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Filter {
    /// The text as typed.
    pub(crate) text: String,
    /// The terms in force: the text's, or while it does not parse, the last text's that did
    /// (the table does not jump to every row on the way from `pid:` to `pid:41230`).
    pub(crate) terms: Vec<Term>,
    /// Why the text does not parse, while it does not.
    pub(crate) error: Option<String>,
    /// The prompt is open (`/`): keys edit the text.
    pub(crate) editing: bool,
}

impl Filter {
    /// A filter of `text`, closed; an error when it does not parse.
    pub(crate) fn of(text: &str) -> Result<Filter, String> {
        let terms = parse(text)?;
        Ok(Filter {
            text: text.trim().to_string(),
            terms,
            error: None,
            editing: false,
        })
    }

    /// Whether some row may be hidden: a term is in force.
    pub(crate) fn is_on(&self) -> bool {
        !self.terms.is_empty()
    }

    /// The text changed: its terms are in force if it parses.
    fn set_text(&mut self, text: String) {
        match parse(&text) {
            Ok(terms) => {
                self.terms = terms;
                self.error = None;
            }
            Err(e) => self.error = Some(e),
        }
        self.text = text;
    }
}

impl State {
    /// `/` on the main screen: the filter's prompt, with the filter's text to edit.
    pub(super) fn open_filter(&mut self) {
        if self.view == super::View::Main {
            self.process_table.filter.editing = true;
        }
    }

    /// Esc: no filter; the table shows every process again, the selection where it was.
    pub(super) fn clear_filter(&mut self) {
        if self.process_table.filter == Filter::default() {
            return;
        }
        self.process_table.filter = Filter::default();
        self.clamp_selection();
    }

    /// Starts the monitor ordered by `sort` (the config file's `sort`).
    pub fn start_sorted(&mut self, sort: crate::present::sort::SortKey) {
        self.process_table.sort = sort;
    }

    /// The table filtered by `text`, as `/` would (`--user`, `--pid`, `--gpu`, the config
    /// file's `[filter]`).
    pub fn start_filtered(&mut self, text: &str) -> Result<(), String> {
        self.process_table.filter = Filter::of(text)?;
        self.clamp_selection();
        Ok(())
    }

    /// A key while the filter's prompt is open: typing edits the filter (the table follows
    /// at each key), Backspace and Ctrl-U take back, Enter keeps it and returns to the table
    /// (not while it does not parse), Esc clears it.
    pub(crate) fn filter_key(&mut self, key: KeyEvent) {
        if key.kind == KeyEventKind::Release {
            return;
        }
        self.notice = None;
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let filter = &mut self.process_table.filter;
        let mut text = filter.text.clone();
        match key.code {
            KeyCode::Char('c') if ctrl => {
                self.quit = true;
                return;
            }
            KeyCode::Char('z') if ctrl => {
                self.suspend_requested = true;
                return;
            }
            KeyCode::Esc => return self.clear_filter(),
            KeyCode::Enter => {
                if filter.error.is_none() {
                    filter.editing = false;
                    filter.text = filter.text.trim().to_string();
                }
                return;
            }
            KeyCode::Char('u') if ctrl => text.clear(),
            KeyCode::Backspace => {
                text.pop();
            }
            KeyCode::Char(c) if !ctrl && !c.is_control() && text.chars().count() < MOST_CHARS => {
                text.push(c)
            }
            _ => return,
        }
        filter.set_text(text);
        self.clamp_selection();
    }
}

#[cfg(test)]
#[path = "filter_tests.rs"]
pub(super) mod tests;
