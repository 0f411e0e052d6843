//! Who a process belongs to: its Kubernetes pod, its container, its Slurm step, its systemd
//! unit, the launcher that started it. Observed from `/proc` (cgroup, environ, the process
//! tree) and the container runtimes' own files, once per process; every field says where it
//! came from, and what could not be read says why. Nothing here is inferred from a name.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What kind of owner names the process first: a pod before its container, a container
/// before the Slurm step or unit it may run in, a launcher only when nothing else does.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum OwnerKind {
    /// A Kubernetes pod (the pod's UID from the cgroup, its names where the node logs them).
    Pod,
    /// A container outside Kubernetes (docker, podman, containerd, LXC).
    Container,
    /// A Slurm job step.
    Slurm,
    /// A systemd service.
    Unit,
    /// Only a launcher (torchrun, accelerate, deepspeed, mpirun, srun) names it.
    Launcher,
    /// Nothing names an owner: a login session's process, say.
    #[default]
    None,
    /// The process's cgroup could not be read: the owner is not known (see `unreadable`).
    Unknown,
}

impl OwnerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OwnerKind::Pod => "pod",
            OwnerKind::Container => "container",
            OwnerKind::Slurm => "slurm",
            OwnerKind::Unit => "unit",
            OwnerKind::Launcher => "launcher",
            OwnerKind::None => "none",
            OwnerKind::Unknown => "unknown",
        }
    }
}

/// Where a field of an [`Owner`] was read.
pub(crate) mod from {
    /// `/proc/PID/cgroup`.
    pub(crate) const CGROUP: &str = "cgroup";
    /// `/proc/PID/environ`.
    pub(crate) const ENVIRON: &str = "environ";
    /// The container runtime's own state (docker's `config.v2.json`, podman's
    /// `containers.json`).
    pub(crate) const RUNTIME_STATE: &str = "runtime_state";
    /// The kubelet's log directories (`/var/log/pods`, `/var/log/containers`).
    pub(crate) const POD_LOGS: &str = "pod_logs";
    /// The parent chain in `/proc`.
    pub(crate) const PROCESS_TREE: &str = "process_tree";
}

/// The owner of one process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub kind: OwnerKind,
    /// Kubernetes: the pod's namespace and name, where the node's pod log directories name
    /// the pod's UID.
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub pod: Option<String>,
    /// Kubernetes: the pod's UID, from the cgroup path.
    #[serde(default)]
    pub(crate) pod_uid: Option<String>,
    /// The container's name, where the runtime's state or the pod logs give it.
    #[serde(default)]
    pub container: Option<String>,
    /// The container's full ID, from the cgroup path.
    #[serde(default)]
    pub(crate) container_id: Option<String>,
    /// `docker`, `containerd`, `cri-o`, `podman`, `lxc`, where the cgroup path says which.
    #[serde(default)]
    pub(crate) runtime: Option<String>,
    /// Slurm: job, step (`0`, `batch`, `extern`, `interactive`) and task.
    #[serde(default)]
    pub slurm_job: Option<String>,
    #[serde(default)]
    pub(crate) slurm_step: Option<String>,
    #[serde(default)]
    pub(crate) slurm_task: Option<String>,
    /// Slurm: the job's user, from the environ (`SLURM_JOB_USER`).
    #[serde(default)]
    pub(crate) slurm_user: Option<String>,
    /// The process's place in a distributed job, from its environ as the launcher set it:
    /// `RANK` (torchrun, DeepSpeed, Accelerate) or else `SLURM_PROCID`; `LOCAL_RANK` or else
    /// `SLURM_LOCALID`; `WORLD_SIZE` or else `SLURM_NTASKS`. Decimal numbers only.
    #[serde(default)]
    pub rank: Option<String>,
    #[serde(default)]
    pub local_rank: Option<String>,
    #[serde(default)]
    pub world_size: Option<String>,
    /// The run a rank belongs to across nodes where no Slurm job names it: torchrun's
    /// `TORCHELASTIC_RUN_ID` (its `--rdzv-id`; not the default `none`), else the rendezvous
    /// `MASTER_ADDR:MASTER_PORT` every rank of one job shares.
    #[serde(default)]
    pub run_id: Option<String>,
    /// The systemd service the process runs in (`train.service`).
    #[serde(default)]
    pub(crate) unit: Option<String>,
    /// The nearest ancestor that launches training workers, and its name.
    #[serde(default)]
    pub(crate) launcher_pid: Option<u32>,
    #[serde(default)]
    pub(crate) launcher: Option<String>,
    /// Where each field above was read (`cgroup`, `environ`, `runtime_state`, `pod_logs`,
    /// `process_tree`), by field name.
    #[serde(default)]
    pub(crate) source: BTreeMap<String, String>,
    /// What could not be read, and why, by what was asked (`cgroup`, `environ`, `pod`,
    /// `container`).
    #[serde(default)]
    pub(crate) unreadable: BTreeMap<String, String>,
}

impl Owner {
    /// The owner in a few words, for a table cell: `pod train/llama-7b-0`, `slurm 81234.0`,
    /// `docker a1b2c3d4e5f6`, `unit train.service`, `torchrun 4242`; `None` when nothing names
    /// one, and `n/a` when it cannot be known.
    pub(crate) fn short(&self) -> Option<String> {
        let id = |id: &String| id.chars().take(12).collect::<String>();
        match self.kind {
            OwnerKind::Pod => Some(match (&self.namespace, &self.pod) {
                (Some(ns), Some(pod)) => format!("pod {ns}/{pod}"),
                _ => format!(
                    "pod {}",
                    self.pod_uid
                        .as_deref()
                        .map(|u| &u[..u.len().min(8)])
                        .unwrap_or("?")
                ),
            }),
            OwnerKind::Container => {
                let runtime = self.runtime.as_deref().unwrap_or("container");
                let name = self
                    .container
                    .clone()
                    .or_else(|| self.container_id.as_ref().map(id))
                    .unwrap_or_else(|| "?".into());
                Some(format!("{runtime} {name}"))
            }
            OwnerKind::Slurm => Some(match (&self.slurm_job, &self.slurm_step) {
                (Some(job), Some(step)) => format!("slurm {job}.{step}"),
                (Some(job), None) => format!("slurm {job}"),
                _ => "slurm ?".into(),
            }),
            OwnerKind::Unit => self.unit.as_ref().map(|u| format!("unit {u}")),
            OwnerKind::Launcher => Some(format!(
                "{} {}",
                self.launcher.as_deref().unwrap_or("launcher"),
                self.launcher_pid.map(|p| p.to_string()).unwrap_or_default()
            )),
            OwnerKind::None => None,
            OwnerKind::Unknown => Some("n/a".into()),
        }
    }

    /// Sets `field` to `value`, read from `source`.
    pub(crate) fn set(&mut self, field: &str, value: String, source: &str) {
        let slot = match field {
            "namespace" => &mut self.namespace,
            "pod" => &mut self.pod,
            "pod_uid" => &mut self.pod_uid,
            "container" => &mut self.container,
            "container_id" => &mut self.container_id,
            "runtime" => &mut self.runtime,
            "slurm_job" => &mut self.slurm_job,
            "slurm_step" => &mut self.slurm_step,
            "slurm_task" => &mut self.slurm_task,
            "slurm_user" => &mut self.slurm_user,
            "rank" => &mut self.rank,
            "local_rank" => &mut self.local_rank,
            "world_size" => &mut self.world_size,
            "run_id" => &mut self.run_id,
            "unit" => &mut self.unit,
            "launcher" => &mut self.launcher,
            _ => return,
        };
        *slot = Some(value);
        self.source.insert(field.to_string(), source.to_string());
    }

    /// The kind the fields now name: pod, container, Slurm, unit, launcher, in that order.
    pub(crate) fn settle_kind(&mut self) {
        if self.kind == OwnerKind::Unknown {
            return;
        }
        self.kind = if self.pod_uid.is_some() {
            OwnerKind::Pod
        } else if self.container_id.is_some() {
            OwnerKind::Container
        } else if self.slurm_job.is_some() {
            OwnerKind::Slurm
        } else if self.unit.is_some() {
            OwnerKind::Unit
        } else if self.launcher_pid.is_some() {
            OwnerKind::Launcher
        } else {
            OwnerKind::None
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_short_form_names_the_owner_as_an_operator_says_it() {
        let mut pod = Owner::default();
        pod.set(
            "pod_uid",
            "8d1e2b3c-0000-4000-8000-000000000001".into(),
            from::CGROUP,
        );
        pod.settle_kind();
        assert_eq!(pod.short().as_deref(), Some("pod 8d1e2b3c"));
        pod.set("namespace", "train".into(), from::POD_LOGS);
        pod.set("pod", "llama-7b-0".into(), from::POD_LOGS);
        assert_eq!(pod.short().as_deref(), Some("pod train/llama-7b-0"));

        let mut slurm = Owner::default();
        slurm.set("slurm_job", "81234".into(), from::CGROUP);
        slurm.set("slurm_step", "0".into(), from::CGROUP);
        slurm.settle_kind();
        assert_eq!(slurm.short().as_deref(), Some("slurm 81234.0"));

        let mut docker = Owner::default();
        docker.set("container_id", "a1b2c3d4e5f6a7b8c9d0".into(), from::CGROUP);
        docker.set("runtime", "docker".into(), from::CGROUP);
        docker.settle_kind();
        assert_eq!(docker.short().as_deref(), Some("docker a1b2c3d4e5f6"));
        docker.set("container", "trainer".into(), from::RUNTIME_STATE);
        assert_eq!(docker.short().as_deref(), Some("docker trainer"));

        assert_eq!(Owner::default().short(), None);
        let unknown = Owner {
            kind: OwnerKind::Unknown,
            ..Owner::default()
        };
        assert_eq!(unknown.short().as_deref(), Some("n/a"));
    }

    #[test]
    fn a_pod_comes_before_its_container_and_a_container_before_its_slurm_step() {
        let mut owner = Owner::default();
        owner.set("slurm_job", "7".into(), from::ENVIRON);
        owner.set("container_id", "ab".repeat(32), from::CGROUP);
        owner.settle_kind();
        assert_eq!(owner.kind, OwnerKind::Container);
        owner.set("pod_uid", "u".into(), from::CGROUP);
        owner.settle_kind();
        assert_eq!(owner.kind, OwnerKind::Pod);
        assert_eq!(owner.source["slurm_job"], "environ");
    }
}
