//! The owner of each listed process (see [`crate::sample::owner`]): read once per process
//! (pid, start time) from `/proc/PID/cgroup`, `/proc/PID/environ` and the parent chain, with
//! the names the node's runtimes keep. An owner whose names were not there yet (a pod whose
//! log directory appears a moment after it starts) is read again, at most every 10 s.

mod cgroup;
mod launcher;
mod names;

pub(crate) use cgroup::CgroupFacts;
pub(crate) use launcher::Ancestor;
pub(crate) use names::{NamePaths, PodIndex};

use crate::sample::owner::{from, Owner, OwnerKind};
use hashbrown::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long an owner with a part missing is kept before it is read again.
const RETRY: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Known {
    owner: Arc<Owner>,
    /// When to read it again: `None` once everything that could be named is.
    retry_at: Option<Instant>,
}

/// Reads and remembers owners.
#[derive(Debug)]
pub struct Owners {
    proc_root: PathBuf,
    paths: NamePaths,
    pods: PodIndex,
    known: HashMap<(u32, u64), Known>,
    /// The parent chain's processes as read this sample: the processes of one job share
    /// their ancestors, read once, not once per process. Forgotten at each `retain`.
    ancestors: std::cell::RefCell<HashMap<u32, Option<launcher::Ancestor>>>,
}

impl Default for Owners {
    fn default() -> Self {
        Owners::new("/proc", NamePaths::default())
    }
}

impl Owners {
    pub(crate) fn new(proc_root: impl Into<PathBuf>, paths: NamePaths) -> Owners {
        Owners {
            proc_root: proc_root.into(),
            pods: PodIndex::new(paths.clone()),
            paths,
            known: HashMap::new(),
            ancestors: Default::default(),
        }
    }

    /// The owner of a process this `/proc` shows, started at `start_time`.
    pub fn of(&mut self, pid: u32, start_time: u64) -> Arc<Owner> {
        let key = (pid, start_time);
        if let Some(known) = self.known.get(&key) {
            if known.retry_at.is_none_or(|at| Instant::now() < at) {
                return known.owner.clone();
            }
        }
        let owner = Arc::new(self.read(pid));
        let incomplete = ["pod", "container"]
            .iter()
            .any(|k| owner.unreadable.contains_key(*k));
        self.known.insert(
            key,
            Known {
                owner: Arc::clone(&owner),
                retry_at: incomplete.then(|| Instant::now() + RETRY),
            },
        );
        owner
    }

    /// The owner of a process already read by [`Owners::of`], without reading anything: `None`
    /// for one never read (off the screen since it started).
    pub(crate) fn cached(&self, pid: u32, start_time: u64) -> Option<Arc<Owner>> {
        self.known
            .get(&(pid, start_time))
            .map(|known| Arc::clone(&known.owner))
    }

    /// Forgets processes not among `alive` (pid, start time).
    pub(crate) fn retain(&mut self, alive: &hashbrown::HashSet<(u32, u64)>) {
        self.known.retain(|key, _| alive.contains(key));
        self.ancestors.get_mut().clear();
    }

    fn read(&mut self, pid: u32) -> Owner {
        let dir = self.proc_root.join(pid.to_string());
        let mut owner = Owner::default();
        match crate::source::procfs::read_lossy(&dir.join("cgroup")) {
            Ok(text) => self.apply_cgroup(&mut owner, &cgroup::parse(&text)),
            Err(e) => {
                owner.kind = OwnerKind::Unknown;
                owner
                    .unreadable
                    .insert("cgroup".into(), reason(&e, "/proc/PID/cgroup"));
            }
        }
        match crate::source::procfs::read_proc(&dir.join("environ")) {
            Ok(raw) => from_environ(&mut owner, &raw),
            Err(e) => {
                owner
                    .unreadable
                    .insert("environ".into(), reason(&e, "/proc/PID/environ"));
            }
        }
        let root = self.proc_root.clone();
        let ancestors = &self.ancestors;
        let looked = |p: u32| {
            if let Some(known) = ancestors.borrow().get(&p) {
                return known.clone();
            }
            let read = look(&root, p);
            ancestors.borrow_mut().insert(p, read.clone());
            read
        };
        if let Some((launcher_pid, name)) = launcher::find(pid, looked) {
            owner.launcher_pid = Some(launcher_pid);
            owner
                .source
                .insert("launcher_pid".into(), from::PROCESS_TREE.into());
            owner.set("launcher", name, from::PROCESS_TREE);
        }
        owner.settle_kind();
        owner
    }

    fn apply_cgroup(&mut self, owner: &mut Owner, facts: &CgroupFacts) {
        let mut put = |field: &str, value: &Option<String>| {
            if let Some(v) = value {
                owner.set(field, v.clone(), from::CGROUP);
            }
        };
        put("pod_uid", &facts.pod_uid);
        put("container_id", &facts.container_id);
        put("runtime", &facts.runtime.map(str::to_string));
        put("slurm_job", &facts.slurm_job);
        put("slurm_step", &facts.slurm_step);
        put("slurm_task", &facts.slurm_task);
        put("unit", &facts.unit);
        if let Some(name) = &facts.container_name {
            owner.set("container", name.clone(), from::CGROUP);
        }
        if let Some(uid) = &facts.pod_uid {
            match self.pods.pod(uid) {
                Ok(pod) => {
                    owner.set("namespace", pod.namespace.clone(), from::POD_LOGS);
                    owner.set("pod", pod.pod.clone(), from::POD_LOGS);
                    match self.pods.container(&pod, facts.container_id.as_deref()) {
                        Ok(name) => owner.set("container", name, from::POD_LOGS),
                        Err(why) => {
                            owner.unreadable.insert("container".into(), why);
                        }
                    }
                }
                Err(why) => {
                    owner.unreadable.insert("pod".into(), why);
                }
            }
        } else if let (Some(id), None) = (&facts.container_id, &facts.container_name) {
            match names::container_name(&self.paths, facts.runtime, id) {
                Ok(name) => owner.set("container", name, from::RUNTIME_STATE),
                Err(why) => {
                    owner.unreadable.insert("container".into(), why);
                }
            }
        }
    }
}

/// The variables of a process's environment that name its owner: Slurm's, where the cgroup
/// did not name the job (a cluster without Slurm's cgroup plugin), the job's user always, and
/// the launcher's rank, world size and run (torchrun, DeepSpeed, Accelerate and Slurm set
/// them in every worker).
fn from_environ(owner: &mut Owner, raw: &[u8]) {
    const WANTED: [&str; 12] = [
        "SLURM_JOB_ID",
        "SLURM_STEP_ID",
        "SLURM_JOB_USER",
        "SLURM_PROCID",
        "SLURM_LOCALID",
        "SLURM_NTASKS",
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "TORCHELASTIC_RUN_ID",
        "MASTER_ADDR",
        "MASTER_PORT",
    ];
    let mut vars: HashMap<&str, String> = HashMap::new();
    for entry in raw.split(|b| *b == 0) {
        let text = String::from_utf8_lossy(entry);
        if let Some((key, value)) = text.split_once('=') {
            for wanted in WANTED {
                if key == wanted && !value.is_empty() && value.len() <= 256 {
                    vars.insert(wanted, value.to_string());
                }
            }
        }
    }
    if owner.slurm_job.is_none() {
        if let Some(job) = vars.remove("SLURM_JOB_ID") {
            owner.set("slurm_job", job, from::ENVIRON);
            if let Some(step) = vars.remove("SLURM_STEP_ID") {
                owner.set("slurm_step", step, from::ENVIRON);
            }
            if let Some(task) = vars.get("SLURM_PROCID") {
                owner.set("slurm_task", task.clone(), from::ENVIRON);
            }
        }
    }
    if owner.slurm_job.is_some() {
        if let Some(user) = vars.remove("SLURM_JOB_USER") {
            owner.set("slurm_user", user, from::ENVIRON);
        }
    }
    // A launcher's own variable first, Slurm's where the launcher is srun itself.
    let number = |value: Option<&String>| {
        value
            .filter(|v| v.len() <= 10 && v.bytes().all(|b| b.is_ascii_digit()))
            .cloned()
    };
    let first = |ours: &str, slurm: &str| number(vars.get(ours)).or(number(vars.get(slurm)));
    for (field, ours, slurm) in [
        ("rank", "RANK", "SLURM_PROCID"),
        ("local_rank", "LOCAL_RANK", "SLURM_LOCALID"),
        ("world_size", "WORLD_SIZE", "SLURM_NTASKS"),
    ] {
        if let Some(value) = first(ours, slurm) {
            owner.set(field, value, from::ENVIRON);
        }
    }
    let run = vars
        .get("TORCHELASTIC_RUN_ID")
        .filter(|id| id.as_str() != "none")
        .cloned()
        .or_else(
            || match (vars.get("MASTER_ADDR"), vars.get("MASTER_PORT")) {
                (Some(addr), Some(port)) => Some(format!("{addr}:{port}")),
                _ => None,
            },
        );
    if let Some(run) = run {
        owner.set("run_id", run, from::ENVIRON);
    }
}

/// One process of a parent chain, from `stat` (parent, comm) and `cmdline`.
fn look(root: &std::path::Path, pid: u32) -> Option<Ancestor> {
    let dir = root.join(pid.to_string());
    let stat = crate::source::procfs::read_line_file(&dir.join("stat")).ok()?;
    let crate::source::procfs::Stat { comm, ppid, .. } = crate::source::procfs::Stat::parse(&stat);
    let comm = comm?.to_string();
    let argv = crate::source::procfs::read_proc(&dir.join("cmdline"))
        .map(|raw| {
            raw.split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .take(64)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default();
    Some(Ancestor { ppid, comm, argv })
}

fn reason(e: &std::io::Error, what: &str) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            format!("{what}: permission denied (another user's process; as root strata reads it)")
        }
        _ => format!("{what}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_from_the_environment_when_the_cgroup_does_not_name_it() {
        let mut owner = Owner::default();
        from_environ(
            &mut owner,
            b"PATH=/bin\0SLURM_JOB_ID=81234\0SLURM_STEP_ID=0\0SLURM_JOB_USER=ana\0SLURM_PROCID=3\0",
        );
        owner.settle_kind();
        assert_eq!(owner.kind, OwnerKind::Slurm);
        assert_eq!(owner.short().as_deref(), Some("slurm 81234.0"));
        assert_eq!(owner.source["slurm_job"], "environ");
        assert_eq!(owner.slurm_user.as_deref(), Some("ana"));
        assert_eq!(owner.slurm_task.as_deref(), Some("3"));
        // The cgroup's word stands; the environ adds the user.
        let mut owner = Owner::default();
        owner.set("slurm_job", "7".into(), from::CGROUP);
        from_environ(&mut owner, b"SLURM_JOB_ID=8\0SLURM_JOB_USER=bo\0");
        assert_eq!(owner.slurm_job.as_deref(), Some("7"));
        assert_eq!(owner.slurm_user.as_deref(), Some("bo"));
        // No Slurm, no user claimed.
        let mut owner = Owner::default();
        from_environ(&mut owner, b"SLURM_JOB_USER=x\0");
        assert_eq!(owner.slurm_user, None);
    }

    #[test]
    fn a_rank_world_size_and_run_from_the_launchers_environment() {
        // torchrun: its own variables; the run is its rendezvous id.
        let mut owner = Owner::default();
        from_environ(
            &mut owner,
            b"RANK=17\0LOCAL_RANK=1\0WORLD_SIZE=512\0TORCHELASTIC_RUN_ID=llm-a\0MASTER_ADDR=n0\0MASTER_PORT=29500\0",
        );
        let got = |o: &Owner| {
            [&o.rank, &o.local_rank, &o.world_size, &o.run_id]
                .map(|v| v.as_deref().map(str::to_string))
        };
        let some = |v: &str| Some(v.to_string());
        assert_eq!(
            got(&owner),
            [some("17"), some("1"), some("512"), some("llm-a")]
        );
        assert_eq!(owner.source["rank"], "environ");
        // torchrun's default id `none` names no run: the rendezvous address does.
        let mut owner = Owner::default();
        from_environ(
            &mut owner,
            b"RANK=3\0TORCHELASTIC_RUN_ID=none\0MASTER_ADDR=10.0.0.1\0MASTER_PORT=29500\0",
        );
        assert_eq!(owner.run_id.as_deref(), Some("10.0.0.1:29500"));
        // srun without a launcher: Slurm's own variables; the launcher's win where both are.
        let mut owner = Owner::default();
        from_environ(
            &mut owner,
            b"SLURM_JOB_ID=9\0SLURM_PROCID=40\0SLURM_LOCALID=0\0SLURM_NTASKS=64\0",
        );
        assert_eq!(got(&owner), [some("40"), some("0"), some("64"), None]);
        let mut owner = Owner::default();
        from_environ(&mut owner, b"SLURM_PROCID=5\0RANK=6\0");
        assert_eq!(owner.rank.as_deref(), Some("6"));
        // Not a number, or too long for one: no rank, and no run from half an address.
        let mut owner = Owner::default();
        from_environ(
            &mut owner,
            b"RANK=\x1b[31m\0LOCAL_RANK=99999999999\0WORLD_SIZE=-1\0MASTER_ADDR=n0\0",
        );
        assert_eq!(got(&owner), [None, None, None, None]);
    }

    #[test]
    fn this_process_has_an_owner_read_from_its_own_proc() {
        let mut owners = Owners::default();
        let me = std::process::id();
        let owner = owners.of(me, 1);
        assert_ne!(owner.kind, OwnerKind::Unknown, "{owner:?}");
        assert!(!owner.unreadable.contains_key("cgroup"));
        // Cached: the same answer without reading again.
        assert_eq!(owners.of(me, 1), owner);
        owners.retain(&Default::default());
        assert!(owners.known.is_empty());
    }

    #[test]
    fn a_process_whose_proc_cannot_be_read_has_an_unknown_owner_that_says_why() {
        let mut owners = Owners::new("/nonexistent-proc", NamePaths::default());
        let owner = owners.of(4242, 1);
        assert_eq!(owner.kind, OwnerKind::Unknown);
        assert!(
            owner.unreadable["cgroup"].contains("/proc/PID/cgroup"),
            "{owner:?}"
        );
        assert_eq!(owner.short().as_deref(), Some("n/a"));
    }
}
