//! The names behind the IDs a cgroup path gives: a pod's namespace and name, and its
//! container's, from the kubelet's log directories (`/var/log/pods/<namespace>_<pod>_<uid>/
//! <container>/`, and `/var/log/containers/<pod>_<namespace>_<container>-<id>.log` beside
//! it); a container's name from docker's `config.v2.json` or podman's `containers.json`.
//! All of them are readable to root only on most nodes: where they are not, the name is
//! unknown and the reason says so.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where the names are read: the defaults of a node, or a test's directories.
#[derive(Debug, Clone)]
pub(crate) struct NamePaths {
    /// The kubelet's pod log directory (`STRATA_PODS_DIR`, default `/var/log/pods`).
    pub(crate) pods: PathBuf,
    /// docker's containers (`/var/lib/docker/containers`).
    pub(crate) docker: PathBuf,
    /// podman's container list (`/var/lib/containers/storage/overlay-containers/containers.json`).
    pub(crate) podman: PathBuf,
}

impl Default for NamePaths {
    fn default() -> Self {
        let pods = std::env::var_os("STRATA_PODS_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/var/log/pods"));
        NamePaths {
            pods,
            docker: PathBuf::from("/var/lib/docker/containers"),
            podman: PathBuf::from("/var/lib/containers/storage/overlay-containers/containers.json"),
        }
    }
}

/// A pod as its log directory names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PodNames {
    pub(crate) namespace: String,
    pub(crate) pod: String,
    /// The pod's directory (its containers are its subdirectories).
    pub(crate) dir: PathBuf,
}

/// The pod log directory, listed at most once every [`RESCAN`] (pods come and go; a pod not
/// found is looked for again at the next listing).
#[derive(Debug)]
pub(crate) struct PodIndex {
    paths: NamePaths,
    by_uid: HashMap<String, PodNames>,
    listed: Option<Instant>,
    /// Why the directory could not be listed, as last seen.
    pub(crate) problem: Option<String>,
}

const RESCAN: Duration = Duration::from_secs(10);

impl PodIndex {
    pub(crate) fn new(paths: NamePaths) -> PodIndex {
        PodIndex {
            paths,
            by_uid: HashMap::new(),
            listed: None,
            problem: None,
        }
    }

    /// The names of the pod with this UID, or why there are none.
    pub(crate) fn pod(&mut self, uid: &str) -> Result<PodNames, String> {
        if !self.by_uid.contains_key(uid) && self.listed.is_none_or(|t| t.elapsed() >= RESCAN) {
            self.list();
        }
        if let Some(names) = self.by_uid.get(uid) {
            return Ok(names.clone());
        }
        Err(self.problem.clone().unwrap_or_else(|| {
            format!("no directory of pod {uid} in {}", self.paths.pods.display())
        }))
    }

    fn list(&mut self) {
        self.listed = Some(Instant::now());
        let entries = match std::fs::read_dir(&self.paths.pods) {
            Ok(entries) => entries,
            Err(e) => {
                self.problem = Some(format!("cannot list {}: {e}", self.paths.pods.display()));
                return;
            }
        };
        self.problem = None;
        self.by_uid.clear();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some((namespace, pod, uid)) = split_pod_dir(&name) {
                self.by_uid.insert(
                    uid.to_string(),
                    PodNames {
                        namespace: namespace.to_string(),
                        pod: pod.to_string(),
                        dir: entry.path(),
                    },
                );
            }
        }
    }

    /// The name of the container `id` of `pod`: from `/var/log/containers` (beside the pods
    /// directory), which names it with its ID; else the pod's one container directory.
    pub(crate) fn container(&self, pod: &PodNames, id: Option<&str>) -> Result<String, String> {
        if let (Some(id), Some(parent)) = (id, self.paths.pods.parent()) {
            let prefix = format!("{}_{}_", pod.pod, pod.namespace);
            let suffix = format!("-{id}.log");
            if let Ok(entries) = std::fs::read_dir(parent.join("containers")) {
                for entry in entries.flatten() {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if let Some(container) = name
                        .strip_prefix(&prefix)
                        .and_then(|rest| rest.strip_suffix(&suffix))
                        .filter(|c| !c.is_empty())
                    {
                        return Ok(container.to_string());
                    }
                }
            }
        }
        let dirs: Vec<String> = std::fs::read_dir(&pod.dir)
            .map_err(|e| format!("cannot list {}: {e}", pod.dir.display()))?
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        match dirs.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(format!("{} has no container directory", pod.dir.display())),
            many => Err(format!(
                "the pod has {} containers and no log link names this one",
                many.len()
            )),
        }
    }
}

/// `<namespace>_<pod>_<uid>`: Kubernetes names cannot hold `_`, so the split is exact.
fn split_pod_dir(name: &str) -> Option<(&str, &str, &str)> {
    let mut parts = name.splitn(3, '_');
    let namespace = parts.next().filter(|p| !p.is_empty())?;
    let pod = parts.next().filter(|p| !p.is_empty())?;
    let uid = parts.next().filter(|p| p.len() == 36)?;
    Some((namespace, pod, uid))
}

/// A container's name from its runtime's own state: docker's `config.v2.json` (`"Name":
/// "/trainer"`), podman's `containers.json` (`"names": ["trainer"]`).
pub(crate) fn container_name(
    paths: &NamePaths,
    runtime: Option<&str>,
    id: &str,
) -> Result<String, String> {
    match runtime {
        Some("docker") => {
            let file = paths.docker.join(id).join("config.v2.json");
            let text = read_small(&file)?;
            let value: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| format!("{} is not JSON: {e}", file.display()))?;
            value["Name"]
                .as_str()
                .map(|n| n.trim_start_matches('/').to_string())
                .filter(|n| !n.is_empty())
                .ok_or_else(|| format!("{} names no container", file.display()))
        }
        Some("podman") => {
            let text = read_small(&paths.podman)?;
            let value: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| format!("{} is not JSON: {e}", paths.podman.display()))?;
            value
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["id"] == id)
                .and_then(|c| c["names"][0].as_str())
                .map(str::to_string)
                .ok_or_else(|| format!("{} does not list {id}", paths.podman.display()))
        }
        Some(other) => Err(format!("strata does not read {other}'s container names")),
        None => Err("the cgroup path does not say which runtime holds it".into()),
    }
}

/// A runtime's state file, read only when small (a hostile or corrupt one is not read whole).
fn read_small(path: &Path) -> Result<String, String> {
    const LIMIT: u64 = 4 << 20;
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if meta.len() > LIMIT {
        return Err(format!("{} is over {LIMIT} bytes", path.display()));
    }
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "8d1e2b3c-4a5b-4c6d-8e7f-0a1b2c3d4e5f";
    const ID: &str = "4f1b9a0c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a";

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    fn scratch(name: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("strata-names-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch");
        Dir(dir)
    }
    fn paths(root: &Path) -> NamePaths {
        NamePaths {
            pods: root.join("pods"),
            docker: root.join("docker"),
            podman: root.join("podman.json"),
        }
    }

    #[test]
    fn a_pod_is_named_by_its_log_directory_and_its_container_by_the_log_link() {
        let dir = scratch("pods");
        let pod_dir = dir.0.join(format!("pods/train_llama-7b-0_{UID}"));
        std::fs::create_dir_all(pod_dir.join("trainer")).expect("pod dir");
        let mut index = PodIndex::new(paths(&dir.0));
        let pod = index.pod(UID).expect("found");
        assert_eq!(
            (pod.namespace.as_str(), pod.pod.as_str()),
            ("train", "llama-7b-0")
        );
        assert_eq!(index.container(&pod, Some(ID)).as_deref(), Ok("trainer"));

        // Two containers: only the log link can say which one this is.
        std::fs::create_dir_all(pod_dir.join("sidecar")).expect("second container");
        assert!(index.container(&pod, Some(ID)).is_err());
        std::fs::create_dir_all(dir.0.join("containers")).expect("containers dir");
        std::fs::write(
            dir.0
                .join(format!("containers/llama-7b-0_train_trainer-{ID}.log")),
            "",
        )
        .expect("link");
        assert_eq!(index.container(&pod, Some(ID)).as_deref(), Ok("trainer"));

        let missing = index.pod("00000000-0000-0000-0000-000000000000");
        assert!(missing.unwrap_err().contains("no directory of pod"));
    }

    #[test]
    fn an_unreadable_pods_directory_says_why() {
        let dir = scratch("nopods");
        let mut index = PodIndex::new(paths(&dir.0));
        let err = index.pod(UID).expect_err("no pods dir");
        assert!(err.starts_with("cannot list"), "{err}");
    }

    #[test]
    fn container_names_from_docker_and_podman_state() {
        let dir = scratch("runtimes");
        let p = paths(&dir.0);
        std::fs::create_dir_all(p.docker.join(ID)).expect("docker dir");
        std::fs::write(
            p.docker.join(ID).join("config.v2.json"),
            r#"{"ID":"x","Name":"/trainer","State":{}}"#,
        )
        .expect("config");
        assert_eq!(
            container_name(&p, Some("docker"), ID).as_deref(),
            Ok("trainer")
        );
        std::fs::write(
            &p.podman,
            format!(r#"[{{"id":"{ID}","names":["eval-job"]}}]"#),
        )
        .expect("podman");
        assert_eq!(
            container_name(&p, Some("podman"), ID).as_deref(),
            Ok("eval-job")
        );
        assert!(container_name(&p, Some("docker"), &"0".repeat(64)).is_err());
        assert!(container_name(&p, None, ID).is_err());
    }

    #[test]
    fn pod_directories_split_exactly() {
        assert_eq!(
            split_pod_dir(&format!("kube-system_coredns-5d78c9869d-abcde_{UID}")),
            Some(("kube-system", "coredns-5d78c9869d-abcde", UID))
        );
        assert_eq!(split_pod_dir("junk"), None);
        assert_eq!(split_pod_dir("a_b_short"), None);
    }
}
