//! Who owns the demo node's processes: a Slurm step of two torchrun ranks, inference in
//! Kubernetes pods, a fine-tune in a docker container, an embedding service as a systemd
//! unit, and one process of a login session that nothing names. Made once and shared, as the
//! real source shares an owner between the entries of one process.

use super::story::{Actor, Place};
use crate::sample::owner::{from, Owner};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// The story's launcher of the training ranks (a `torchrun` the node does not list: it holds
/// no GPU memory).
pub(crate) const TORCHRUN_PID: u32 = 41200;

fn owner(fields: &[(&str, &str, &str)]) -> Owner {
    let mut owner = Owner::default();
    for (field, value, source) in fields {
        owner.set(field, value.to_string(), source);
    }
    owner
}

fn pod(namespace: &str, name: &str, uid: &str, container: &str, id: &str) -> Owner {
    owner(&[
        ("pod_uid", uid, from::CGROUP),
        ("container_id", id, from::CGROUP),
        ("runtime", "containerd", from::CGROUP),
        ("namespace", namespace, from::POD_LOGS),
        ("pod", name, from::POD_LOGS),
        ("container", container, from::POD_LOGS),
    ])
}

fn trainer(rank: &str) -> Owner {
    let mut o = owner(&[
        ("slurm_job", "81234", from::CGROUP),
        ("slurm_step", "0", from::CGROUP),
        ("slurm_task", rank, from::CGROUP),
        ("slurm_user", "mlteam", from::ENVIRON),
        ("launcher", "torchrun", from::PROCESS_TREE),
        ("rank", rank, from::ENVIRON),
        ("local_rank", rank, from::ENVIRON),
        ("world_size", "2", from::ENVIRON),
    ]);
    o.launcher_pid = Some(TORCHRUN_PID);
    o.source
        .insert("launcher_pid".into(), from::PROCESS_TREE.into());
    o
}

fn table() -> &'static HashMap<&'static str, Arc<Owner>> {
    static TABLE: OnceLock<HashMap<&'static str, Arc<Owner>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t: HashMap<&'static str, Owner> = HashMap::new();
        t.insert("rank0", trainer("0"));
        t.insert("rank1", trainer("1"));
        t.insert(
            "svc-infer",
            pod(
                "inference",
                "mistral-7b-6d4f9c-x2x7q",
                "3f6c1a2e-9b4d-4e5f-8a7b-1c2d3e4f5a6b",
                "server",
                "9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d",
            ),
        );
        t.insert(
            "svc-jax",
            pod(
                "serving",
                "t5-3b-0",
                "7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d",
                "t5",
                "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b",
            ),
        );
        t.insert(
            "triton",
            pod(
                "serving",
                "triton-0",
                "0d1e2f3a-4b5c-4d6e-9f7a-8b9c0d1e2f3a",
                "triton",
                "5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f",
            ),
        );
        t.insert(
            "carol",
            owner(&[
                (
                    "container_id",
                    "c0ffee00a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8",
                    from::CGROUP,
                ),
                ("runtime", "docker", from::CGROUP),
                ("container", "carol-finetune", from::RUNTIME_STATE),
            ]),
        );
        t.insert(
            "svc-embed",
            owner(&[("unit", "embeddings.service", from::CGROUP)]),
        );
        for o in t.values_mut() {
            o.settle_kind();
        }
        t.into_iter().map(|(k, v)| (k, Arc::new(v))).collect()
    })
}

/// The owner of a demo actor: `None` where the process is not visible (its `/proc` entry
/// is gone), kind `none` where nothing names one.
pub(crate) fn of(actor: &Actor) -> Option<Arc<Owner>> {
    if !actor.visible {
        return None;
    }
    let key = match (actor.user, actor.place) {
        (Some("mlteam"), Place::Gpu(0)) => "rank0",
        (Some("mlteam"), _) => "rank1",
        (Some(user), _) => user,
        (None, _) => "",
    };
    static NOBODY: OnceLock<Arc<Owner>> = OnceLock::new();
    Some(
        table()
            .get(key)
            .cloned()
            .unwrap_or_else(|| Arc::clone(NOBODY.get_or_init(|| Arc::new(Owner::default())))),
    )
}
