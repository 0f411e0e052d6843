//! Process identity from `/proc`: user, command line, state and start time, and whether a PID
//! is visible at all in this PID namespace (inside a container NVML reports host PIDs).

use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;

/// What `/proc` says of one PID, as observed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub visible: bool,
    /// The PID exists but this `/proc` hides it (`hidepid`, permissions): not gone.
    pub hidden: bool,
    pub state: Option<String>,
    pub start_time: Option<u64>,
    pub user: Option<String>,
    pub command: Option<String>,
    /// Where `/proc/PID/exe` points, when readable.
    pub executable: Option<String>,
}

/// What is read once per process: it cannot change while the process lives (an `exec` keeps
/// the pid but is rare enough that the next start time read catches most).
#[derive(Debug, Clone)]
struct Fixed {
    user: Option<String>,
    command: Option<String>,
    executable: Option<String>,
}

/// The inode of the initial PID namespace (`PROC_PID_INIT_INO` in the kernel).
const INITIAL_PID_NAMESPACE: &str = "pid:[4026531836]";

/// Reads `/proc` (or another root, for tests) and resolves user names once per UID.
#[derive(Debug)]
pub struct ProcFs {
    root: PathBuf,
    users: HashMap<u32, Option<String>>,
    passwd: Option<String>,
    /// User and command line per (pid, start time): they are read once per process, and only
    /// `stat` (state, start time) is read at every poll.
    known: HashMap<(u32, u64), Fixed>,
}

impl Default for ProcFs {
    fn default() -> Self {
        ProcFs::new("/proc")
    }
}

impl ProcFs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ProcFs {
            root: root.into(),
            users: HashMap::new(),
            passwd: None,
            known: HashMap::new(),
        }
    }

    /// Forgets processes not among `alive` (pid, start time), so the cache stays bounded.
    pub fn retain(&mut self, alive: &[(u32, u64)]) {
        self.known.retain(|key, _| alive.contains(key));
    }

    /// Whether this monitor runs in the initial (host) PID namespace; `None` if unreadable.
    pub fn host_pid_namespace(&self) -> Option<bool> {
        let link = fs::read_link(self.root.join("self/ns/pid")).ok()?;
        Some(link.to_string_lossy() == INITIAL_PID_NAMESPACE)
    }

    /// Everything `/proc` tells of a PID. A PID that is not there is `visible: false`.
    pub fn identity(&mut self, pid: u32) -> Identity {
        let dir = self.root.join(pid.to_string());
        let Ok(stat) = fs::read_to_string(dir.join("stat")) else {
            return Identity::default();
        };
        let (comm, state, start_time) = parse_stat(&stat);
        if let Some(fixed) = start_time.and_then(|t| self.known.get(&(pid, t))) {
            return Identity {
                visible: true,
                hidden: false,
                state,
                start_time,
                user: fixed.user.clone(),
                command: fixed.command.clone(),
                executable: fixed.executable.clone(),
            };
        }
        let uid = fs::read_to_string(dir.join("status"))
            .ok()
            .and_then(|s| parse_uid(&s));
        let user = uid.and_then(|uid| self.user_name(uid));
        let command = fs::read(dir.join("cmdline"))
            .ok()
            .map(|raw| {
                let text = String::from_utf8_lossy(&raw);
                text.trim_end_matches('\0').replace('\0', " ")
            })
            .filter(|c| !c.is_empty())
            .or_else(|| comm.map(|c| format!("[{c}]")));
        let executable = fs::read_link(dir.join("exe"))
            .ok()
            .map(|p| p.to_string_lossy().into_owned());
        if let Some(t) = start_time {
            let fixed = Fixed {
                user: user.clone(),
                command: command.clone(),
                executable: executable.clone(),
            };
            self.known.insert((pid, t), fixed);
        }
        Identity {
            visible: true,
            hidden: false,
            state,
            start_time,
            user,
            command,
            executable,
        }
    }

    fn user_name(&mut self, uid: u32) -> Option<String> {
        if let Some(name) = self.users.get(&uid) {
            return name.clone();
        }
        if self.passwd.is_none() {
            self.passwd = Some(fs::read_to_string("/etc/passwd").unwrap_or_default());
        }
        let name = self
            .passwd
            .as_deref()
            .and_then(|p| user_from_passwd(p, uid))
            .or_else(|| Some(uid.to_string()));
        self.users.insert(uid, name.clone());
        name
    }
}

/// Parses `/proc/PID/stat`: (comm, state letter, start time in clock ticks). The command name
/// is in parentheses and may itself hold spaces and parentheses, so fields are counted from
/// the last `)`.
pub fn parse_stat(stat: &str) -> (Option<String>, Option<String>, Option<u64>) {
    let open = stat.find('(');
    let close = stat.rfind(')');
    let (Some(open), Some(close)) = (open, close) else {
        return (None, None, None);
    };
    if close < open {
        return (None, None, None);
    }
    let comm = stat[open + 1..close].to_string();
    let mut rest = stat[close + 1..].split_whitespace();
    let state = rest.next().map(str::to_string);
    // After the state come fields 4..; start time is field 22, i.e. the 19th after state.
    let start_time = rest.nth(18).and_then(|v| v.parse().ok());
    (Some(comm), state, start_time)
}

fn parse_uid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

fn user_from_passwd(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let found: u32 = fields.nth(1)?.parse().ok()?;
        (found == uid).then(|| name.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_parentheses_and_spaces_in_the_name() {
        let stat = "4242 (python (rank 0)) S 1 4242 4242 0 -1 4194560 9 0 0 0 3 1 0 0 20 0 8 0 987654 1000 100";
        let (comm, state, start) = parse_stat(stat);
        assert_eq!(comm.as_deref(), Some("python (rank 0)"));
        assert_eq!(state.as_deref(), Some("S"));
        assert_eq!(start, Some(987_654));
    }

    #[test]
    fn garbage_stat_gives_nothing() {
        assert_eq!(parse_stat("nonsense"), (None, None, None));
        assert_eq!(parse_stat(") x ("), (None, None, None));
    }

    #[test]
    fn this_process_is_visible_and_a_huge_pid_is_not() {
        let mut procfs = ProcFs::default();
        let me = procfs.identity(std::process::id());
        assert!(me.visible);
        assert!(me.start_time.is_some());
        assert!(me.command.is_some());
        assert!(!procfs.identity(4_000_000_000).visible);
    }

    #[test]
    fn users_come_from_passwd() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\n";
        assert_eq!(user_from_passwd(passwd, 1000).as_deref(), Some("alice"));
        assert_eq!(user_from_passwd(passwd, 7), None);
        assert_eq!(
            parse_uid("Name:\tx\nUid:\t1000\t1000\t1000\t1000\n"),
            Some(1000)
        );
    }
}
