//! What a process's cgroup path says of its owner (`/proc/PID/cgroup`), pure text in, facts
//! out. The shapes read are the ones the runtimes write:
//!
//! - Kubernetes, systemd driver: `/kubepods.slice/kubepods-burstable.slice/
//!   kubepods-burstable-pod<uid, _ for ->.slice/cri-containerd-<id>.scope` (QoS `burstable`,
//!   `besteffort`, none for guaranteed; `crio-<id>.scope` for CRI-O, `docker-<id>.scope` for
//!   dockershim);
//! - Kubernetes, cgroupfs driver: `/kubepods/burstable/pod<uid>/<id>`;
//! - docker `/system.slice/docker-<id>.scope` or `/docker/<id>`; podman `libpod-<id>.scope`;
//!   containerd's nerdctl `nerdctl-<id>.scope`; LXC `/lxc.payload.<name>`;
//! - Slurm, cgroup v2 `/system.slice/slurmstepd.scope/job_<id>/step_<s>/user/task_<t>`, v1
//!   `/slurm/uid_<uid>/job_<id>/step_<s>/task_<t>`;
//! - a systemd service: the deepest `*.service` component.
//!
//! The unified (v2) line is read first; on a hybrid host the v1 hierarchies fill in what it
//! does not say.

/// What the cgroup paths name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CgroupFacts {
    pub(crate) pod_uid: Option<String>,
    pub(crate) container_id: Option<String>,
    pub(crate) runtime: Option<&'static str>,
    /// LXC names its container in the path itself.
    pub(crate) container_name: Option<String>,
    pub(crate) slurm_job: Option<String>,
    pub(crate) slurm_step: Option<String>,
    pub(crate) slurm_task: Option<String>,
    pub(crate) unit: Option<String>,
}

/// The facts of a `/proc/PID/cgroup` file.
pub(crate) fn parse(text: &str) -> CgroupFacts {
    let mut paths: Vec<(u8, &str)> = text
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let _id = parts.next()?;
            let controllers = parts.next()?;
            let path = parts.next()?;
            Some((preference(controllers), path))
        })
        .collect();
    paths.sort_by_key(|(rank, _)| *rank);
    let mut facts = CgroupFacts::default();
    for (_, path) in paths {
        let one = parse_path(path);
        facts.pod_uid = facts.pod_uid.or(one.pod_uid);
        if facts.container_id.is_none() {
            facts.container_id = one.container_id;
            facts.runtime = facts.runtime.or(one.runtime);
        }
        facts.container_name = facts.container_name.or(one.container_name);
        if facts.slurm_job.is_none() {
            facts.slurm_job = one.slurm_job;
            facts.slurm_step = one.slurm_step;
            facts.slurm_task = one.slurm_task;
        }
        facts.unit = facts.unit.or(one.unit);
    }
    facts
}

/// The order hierarchies are read in: the unified one, then the v1 controllers a runtime
/// always places its processes in.
fn preference(controllers: &str) -> u8 {
    if controllers.is_empty() {
        return 0;
    }
    let has = |name: &str| controllers.split(',').any(|c| c == name);
    if has("memory") {
        1
    } else if has("pids") {
        2
    } else if has("cpu") || has("cpuacct") {
        3
    } else if has("name=systemd") {
        4
    } else {
        5
    }
}

/// The facts one cgroup path names.
pub(crate) fn parse_path(path: &str) -> CgroupFacts {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let mut facts = CgroupFacts::default();
    let kubepods = parts
        .iter()
        .position(|p| p.starts_with("kubepods") || p.contains("-kubepods"));
    if let Some(start) = kubepods {
        for part in &parts[start..] {
            if let Some(uid) = pod_uid(part) {
                facts.pod_uid = Some(uid);
            }
        }
    }
    for (i, part) in parts.iter().enumerate() {
        if let Some((runtime, id)) = scoped_container(part) {
            facts.container_id = Some(id);
            facts.runtime = Some(runtime);
        } else if is_container_id(part) && i > 0 {
            // cgroupfs: a bare ID, named by its parent where the parent is a runtime's.
            facts.container_id = Some(part.to_string());
            facts.runtime = match parts[i - 1] {
                "docker" => Some("docker"),
                "libpod_parent" => Some("podman"),
                _ => None,
            };
        } else if let Some(name) = part.strip_prefix("lxc.payload.") {
            facts.container_name = Some(name.to_string());
            facts.container_id = Some(name.to_string());
            facts.runtime = Some("lxc");
        }
    }
    let slurm = parts.iter().position(|p| p.contains("slurm"));
    if let Some(start) = slurm {
        for part in &parts[start..] {
            if let Some(job) = part.strip_prefix("job_").filter(|j| is_digits(j)) {
                facts.slurm_job = Some(job.to_string());
            } else if let Some(step) = part.strip_prefix("step_").filter(|s| !s.is_empty()) {
                facts.slurm_step = Some(step.to_string());
            } else if let Some(task) = part.strip_prefix("task_").filter(|t| is_digits(t)) {
                facts.slurm_task = Some(task.to_string());
            }
        }
        if facts.slurm_job.is_none() {
            facts.slurm_step = None;
            facts.slurm_task = None;
        }
    }
    facts.unit = parts
        .iter()
        .rev()
        .find(|p| p.ends_with(".service") && p.len() > ".service".len())
        .map(|p| p.to_string());
    facts
}

/// `kubepods-burstable-pod<uid>.slice`, `kubepods-pod<uid>.slice` (systemd: `_` for `-`) or
/// `pod<uid>` (cgroupfs): the pod's UID, with dashes.
fn pod_uid(part: &str) -> Option<String> {
    let body = part.strip_suffix(".slice").unwrap_or(part);
    let after = match body.rfind("-pod") {
        Some(at) if body.starts_with("kubepods") => &body[at + 4..],
        _ => body.strip_prefix("pod")?,
    };
    let uid = after.replace('_', "-");
    is_uid(&uid).then_some(uid)
}

/// A UID as Kubernetes writes it: 8-4-4-4-12 hex digits.
fn is_uid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A container's scope unit: `<prefix>-<id>.scope` for the prefixes runtimes use.
fn scoped_container(part: &str) -> Option<(&'static str, String)> {
    let body = part.strip_suffix(".scope")?;
    const PREFIXES: [(&str, &str); 7] = [
        ("cri-containerd-", "containerd"),
        ("crio-conmon-", "cri-o"),
        ("crio-", "cri-o"),
        ("docker-", "docker"),
        ("libpod-conmon-", "podman"),
        ("libpod-", "podman"),
        ("nerdctl-", "containerd"),
    ];
    PREFIXES.iter().find_map(|(prefix, runtime)| {
        let id = body.strip_prefix(prefix)?;
        is_container_id(id).then(|| (*runtime, id.to_string()))
    })
}

/// A container ID: 64 lowercase hex digits (docker, containerd, CRI-O, podman alike).
fn is_container_id(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn is_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4f1b9a0c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a";
    const UID: &str = "8d1e2b3c-4a5b-4c6d-8e7f-0a1b2c3d4e5f";

    fn unified(path: &str) -> CgroupFacts {
        parse(&format!("0::{path}\n"))
    }

    #[test]
    fn kubernetes_pods_under_the_systemd_driver_each_qos_and_runtime() {
        let underscored = UID.replace('-', "_");
        for (qos, runtime_scope, runtime) in [
            (
                "burstable",
                format!("cri-containerd-{ID}.scope"),
                "containerd",
            ),
            ("besteffort", format!("crio-{ID}.scope"), "cri-o"),
            ("burstable", format!("docker-{ID}.scope"), "docker"),
        ] {
            let path = format!(
                "/kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{underscored}.slice/{runtime_scope}"
            );
            let facts = unified(&path);
            assert_eq!(facts.pod_uid.as_deref(), Some(UID), "{path}");
            assert_eq!(facts.container_id.as_deref(), Some(ID), "{path}");
            assert_eq!(facts.runtime, Some(runtime), "{path}");
            assert_eq!(facts.unit, None);
        }
        // Guaranteed pods have no QoS slice.
        let facts = unified(&format!(
            "/kubepods.slice/kubepods-pod{underscored}.slice/cri-containerd-{ID}.scope"
        ));
        assert_eq!(facts.pod_uid.as_deref(), Some(UID));
    }

    #[test]
    fn kubernetes_pods_under_the_cgroupfs_driver() {
        for path in [
            format!("/kubepods/burstable/pod{UID}/{ID}"),
            format!("/kubepods/besteffort/pod{UID}/{ID}"),
            format!("/kubepods/pod{UID}/{ID}"),
        ] {
            let facts = unified(&path);
            assert_eq!(facts.pod_uid.as_deref(), Some(UID), "{path}");
            assert_eq!(facts.container_id.as_deref(), Some(ID), "{path}");
            assert_eq!(facts.runtime, None, "cgroupfs does not say which runtime");
        }
    }

    #[test]
    fn containers_outside_kubernetes() {
        let facts = unified(&format!("/system.slice/docker-{ID}.scope"));
        assert_eq!(
            (facts.runtime, facts.container_id.as_deref()),
            (Some("docker"), Some(ID))
        );
        assert_eq!(facts.pod_uid, None);
        let facts = unified(&format!("/docker/{ID}"));
        assert_eq!(
            (facts.runtime, facts.container_id.as_deref()),
            (Some("docker"), Some(ID))
        );
        let facts = unified(&format!(
            "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope/container"
        ));
        assert_eq!(facts.runtime, Some("podman"));
        assert_eq!(facts.unit.as_deref(), Some("user@1000.service"));
        let facts = unified("/lxc.payload.trainbox");
        assert_eq!(facts.runtime, Some("lxc"));
        assert_eq!(facts.container_name.as_deref(), Some("trainbox"));
    }

    #[test]
    fn slurm_steps_in_both_cgroup_versions() {
        let facts = unified("/system.slice/slurmstepd.scope/job_81234/step_0/user/task_3");
        assert_eq!(facts.slurm_job.as_deref(), Some("81234"));
        assert_eq!(facts.slurm_step.as_deref(), Some("0"));
        assert_eq!(facts.slurm_task.as_deref(), Some("3"));
        let v1 = "12:memory:/slurm/uid_1000/job_555/step_batch/task_0\n\
                  11:devices:/slurm/uid_1000/job_555/step_batch\n\
                  1:name=systemd:/system.slice/slurmd.service\n";
        let facts = parse(v1);
        assert_eq!(facts.slurm_job.as_deref(), Some("555"));
        assert_eq!(facts.slurm_step.as_deref(), Some("batch"));
        assert_eq!(facts.slurm_task.as_deref(), Some("0"));
        // A job_ component outside a Slurm hierarchy is not a Slurm job.
        assert_eq!(unified("/user.slice/job_12/step_1").slurm_job, None);
    }

    #[test]
    fn a_hybrid_host_fills_in_from_the_v1_hierarchies() {
        let text = format!(
            "12:pids:/system.slice/docker-{ID}.scope\n\
             4:memory:/system.slice/docker-{ID}.scope\n\
             0::/\n"
        );
        let facts = parse(&text);
        assert_eq!(facts.container_id.as_deref(), Some(ID));
        assert_eq!(facts.runtime, Some("docker"));
    }

    #[test]
    fn systemd_units_and_sessions() {
        assert_eq!(
            unified("/system.slice/train.service").unit.as_deref(),
            Some("train.service")
        );
        assert_eq!(
            unified("/user.slice/user-1000.slice/session-3.scope").unit,
            None
        );
        assert_eq!(unified("/").unit, None);
        assert_eq!(parse(""), CgroupFacts::default());
    }

    #[test]
    fn look_alikes_are_not_owners() {
        // Not hex, too short, or a pod segment outside kubepods.
        assert_eq!(
            unified("/system.slice/docker-notanid.scope").container_id,
            None
        );
        assert_eq!(unified(&format!("/pod{UID}")).pod_uid, None);
        assert_eq!(
            unified(&format!("/kubepods/pod{}/x", &UID[..20])).pod_uid,
            None
        );
        assert_eq!(unified(&format!("/{}", &ID[..63])).container_id, None);
    }
}
