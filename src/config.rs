//! The config file, `$XDG_CONFIG_HOME/strata/config.toml` (`~/.config/strata/config.toml`
//! without it): the monitor's interval, palette, ASCII mode, process table (sort, filter,
//! extra columns) and mouse. A missing file is no error; a key it does not know, or a value it
//! cannot take, is one line naming the file, the line and the key, with a hint.
//!
//! Precedence: the command line over the file over the built-in default
//! ([`Settings::resolve`]).

use crate::layers::Layer;
use crate::present::sort::SortKey;
use serde::{Deserialize, Deserializer};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Which background the screen's colours are chosen for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Palette {
    /// Light text on a dark background.
    #[default]
    Dark,
    /// Dark text on a light (white) background.
    Light,
}

/// The sort keys by the names the file gives them (the process table's column names).
const SORT_NAMES: [(&str, SortKey); 10] = [
    ("used", SortKey::Used),
    (Layer::Live.name(), SortKey::Live),
    (Layer::Fragmented.name(), SortKey::Fragmented),
    (Layer::Cached.name(), SortKey::Cached),
    ("sm", SortKey::Sm),
    ("cpu", SortKey::Cpu),
    ("host_memory", SortKey::HostMemory),
    ("elapsed", SortKey::Elapsed),
    ("pid", SortKey::Pid),
    ("gpu", SortKey::Device),
];

/// The process table's extra columns, after the memory figures: each is shown where the
/// width leaves the command its room, in the order given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Column {
    /// `T`: compute, graphics, an MPS client.
    Kind,
    /// `SM%`.
    Sm,
    /// `CPU%`.
    Cpu,
    /// `OWNER`: the pod, Slurm job or container.
    Owner,
    /// `HMEM`: host memory.
    HostMemory,
    /// `TIME`: how long the process has run.
    Elapsed,
}

impl Column {
    /// Every column, in the order they are given room by default.
    pub const ALL: [Column; 6] = [
        Column::Kind,
        Column::Sm,
        Column::Cpu,
        Column::Owner,
        Column::HostMemory,
        Column::Elapsed,
    ];
}

/// The interval's bounds, seconds: those of `--interval`.
pub const INTERVAL_SECS: (f64, f64) = (0.05, 3600.0);

/// The saved filter of the process table: a process is shown when it matches every part
/// given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    /// The process's user name.
    pub user: Option<String>,
    pub pid: Option<u32>,
    /// The GPU's index.
    pub gpu: Option<u32>,
    /// A part of the command line.
    pub command: Option<String>,
}

impl Filter {
    fn is_empty(&self) -> bool {
        *self == Filter::default()
    }

    /// The filter as `/` takes it: `user:alice pid:4242 gpu:0 cmd:"train.py"`.
    pub fn text(&self) -> String {
        let mut terms = Vec::new();
        terms.extend(self.user.as_ref().map(|u| format!("user:{}", quoted(u))));
        terms.extend(self.pid.map(|p| format!("pid:{p}")));
        terms.extend(self.gpu.map(|g| format!("gpu:{g}")));
        terms.extend(self.command.as_ref().map(|c| format!("cmd:{}", quoted(c))));
        terms.join(" ")
    }
}

/// What the file says; a key it leaves out is `None` (the default applies).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default, deserialize_with = "interval")]
    pub interval: Option<f64>,
    pub theme: Option<Palette>,
    pub ascii: Option<bool>,
    #[serde(default, deserialize_with = "sort")]
    pub sort: Option<SortKey>,
    pub mouse: Option<bool>,
    /// The extra columns offered, in order; `[]` for none.
    pub columns: Option<Vec<Column>>,
    #[serde(default)]
    pub filter: Filter,
}

/// What the command line says of the same settings; `None` where it says nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    pub interval: Option<f64>,
    pub theme: Option<Palette>,
    /// `--ascii` (true); there is no flag that turns it off again.
    pub ascii: Option<bool>,
    pub sort: Option<SortKey>,
    /// `--no-mouse` (false).
    pub mouse: Option<bool>,
    /// A filter given on the command line (`--user`, `--pid`, `--gpu`) replaces the file's
    /// whole: it is not merged part by part.
    pub filter: Option<Filter>,
}

/// The settings the monitor runs with, every one decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub interval: f64,
    pub theme: Palette,
    pub ascii: bool,
    pub sort: SortKey,
    pub mouse: bool,
    pub columns: Vec<Column>,
    pub filter: Filter,
}

impl Default for Settings {
    /// The built-in defaults.
    fn default() -> Self {
        Settings {
            interval: 1.0,
            theme: Palette::Dark,
            ascii: false,
            sort: SortKey::Used,
            mouse: true,
            columns: Column::ALL.to_vec(),
            filter: Filter::default(),
        }
    }
}

impl Settings {
    /// The command line over the file over the built-in default, setting by setting.
    pub fn resolve(cli: &Overrides, file: &Config) -> Settings {
        let builtin = Settings::default();
        Settings {
            interval: cli.interval.or(file.interval).unwrap_or(builtin.interval),
            theme: cli.theme.or(file.theme).unwrap_or(builtin.theme),
            ascii: cli.ascii.or(file.ascii).unwrap_or(builtin.ascii),
            sort: cli.sort.or(file.sort).unwrap_or(builtin.sort),
            mouse: cli.mouse.or(file.mouse).unwrap_or(builtin.mouse),
            columns: file.columns.clone().unwrap_or(builtin.columns),
            filter: cli
                .filter
                .clone()
                .filter(|f| !f.is_empty())
                .unwrap_or_else(|| file.filter.clone()),
        }
    }
}

/// A term's value, in double quotes where it holds a space.
fn quoted(value: &str) -> String {
    if value.chars().any(char::is_whitespace) {
        format!("\"{}\"", value.replace('"', ""))
    } else {
        value.to_string()
    }
}

/// Why the config file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the config file {}: {error} (hint: {HINT})", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("config file {}, line {line}{}: {message} (hint: {HINT})", path.display(), key.as_deref().map(|k| format!(", key `{k}`")).unwrap_or_default())]
    Parse {
        path: PathBuf,
        line: usize,
        key: Option<String>,
        message: String,
    },
}

const HINT: &str = "`strata config --default` prints every key with its default and what it takes";

impl Config {
    /// Where the file is: `$XDG_CONFIG_HOME/strata/config.toml`, else
    /// `$HOME/.config/strata/config.toml`; `None` without either.
    pub fn path() -> Option<PathBuf> {
        path_from(
            std::env::var_os("XDG_CONFIG_HOME"),
            std::env::var_os("HOME"),
        )
    }

    /// The file at `path`: a missing file is the empty config (every default).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Config::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
            Err(error) => Err(ConfigError::Read {
                path: path.to_path_buf(),
                error,
            }),
        }
    }

    /// The file's text, read as coming from `path` (which only names it in an error).
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| located(text, path, &e))
    }

    /// A config file that documents every key, each set to its default: what
    /// `strata config --default` prints.
    pub fn default_text() -> &'static str {
        DEFAULT_TEXT
    }
}

/// The XDG rule: `XDG_CONFIG_HOME` when it is an absolute path, else `~/.config`.
fn path_from(xdg: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let base = match xdg.map(PathBuf::from).filter(|p| p.is_absolute()) {
        Some(dir) => dir,
        None => PathBuf::from(home.filter(|h| !h.is_empty())?).join(".config"),
    };
    Some(base.join("strata").join("config.toml"))
}

/// The parser's error as one line: the line it points at, the key of that line (or the
/// unknown key the message names), and the message without the parser's own excerpt.
fn located(text: &str, path: &Path, error: &toml::de::Error) -> ConfigError {
    let start = error.span().map_or(0, |s| s.start).min(text.len());
    let line = text[..start].matches('\n').count() + 1;
    let line_text = text.lines().nth(line - 1).unwrap_or("");
    let named = error
        .message()
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next());
    let key = named
        .map(str::to_string)
        .or_else(|| key_of(line_text))
        .map(|k| crate::text::clean(&k).into_owned());
    let message = crate::text::clean(error.message().lines().next().unwrap_or("")).into_owned();
    ConfigError::Parse {
        path: path.to_path_buf(),
        line,
        key,
        message,
    }
}

/// The key a `key = value` line sets (its last dotted part), or a `[table]`'s name.
fn key_of(line: &str) -> Option<String> {
    let line = line.trim();
    if let Some(table) = line.strip_prefix('[') {
        return Some(table.trim_end_matches(']').trim().to_string());
    }
    let (key, _) = line.split_once('=')?;
    let key = key.trim().rsplit('.').next()?.trim().trim_matches('"');
    (!key.is_empty()).then(|| key.to_string())
}

fn interval<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let secs = f64::deserialize(d)?;
    let (low, high) = INTERVAL_SECS;
    if !(low..=high).contains(&secs) {
        return Err(serde::de::Error::custom(format!(
            "{secs} is not an interval: seconds from {low} to {high}"
        )));
    }
    Ok(Some(secs))
}

fn sort<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SortKey>, D::Error> {
    let name = String::deserialize(d)?;
    SORT_NAMES
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, key)| Some(*key))
        .ok_or_else(|| {
            let names: Vec<&str> = SORT_NAMES.iter().map(|(n, _)| *n).collect();
            serde::de::Error::custom(format!(
                "no sort by `{}`: one of {}",
                crate::text::clean(&name),
                names.join(", ")
            ))
        })
}

const DEFAULT_TEXT: &str = r#"# strata's config file: $XDG_CONFIG_HOME/strata/config.toml (~/.config/strata/config.toml).
# Every key is optional; a key left out takes its default, shown here. The command line
# overrides this file (--interval, --theme, --ascii, ...).

# Seconds between samples, from 0.05 to 3600.
interval = 1.0

# Colours for a dark terminal background ("dark") or a light one ("light").
theme = "dark"

# Draw with ASCII only: no block, braille or box-drawing characters (for poor terminals
# and fonts).
ascii = false

# The process table's order: used, live, fragmented, cached, sm, cpu, host_memory,
# elapsed, pid or gpu.
sort = "used"

# Click to select, wheel to scroll; false leaves the mouse to the terminal (its own
# selection and copy).
mouse = true

# The process table's extra columns after the memory figures, in the order they are given
# room (each where the width leaves the command 16 cells): kind (T), sm (SM%), cpu (CPU%),
# owner (OWNER), host_memory (HMEM), elapsed (TIME). [] shows none of them.
columns = ["kind", "sm", "cpu", "owner", "host_memory", "elapsed"]

# The process table's saved filter: a process is shown when it matches every part given.
# None by default (every process is shown).
[filter]
# user = "alice"        # the process's user
# pid = 4242
# gpu = 0               # the GPU's index
# command = "train.py"  # a part of the command line
"#;

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
