//! The launcher of a training worker: the nearest ancestor that is `torchrun`,
//! `python -m torch.distributed.run`, `accelerate launch`, `deepspeed`, `mpirun` or `srun`,
//! by the parent chain in `/proc`. A worker's own command is never taken for its launcher.

/// What `/proc` says of one process of the chain: its parent, `comm` and argv.
#[derive(Debug, Clone)]
pub(crate) struct Ancestor {
    pub(crate) ppid: Option<u32>,
    pub(crate) comm: String,
    pub(crate) argv: Vec<String>,
}

/// The launchers' names, as `comm` or as the program (or the script an interpreter runs).
const LAUNCHERS: [&str; 9] = [
    "torchrun",
    "accelerate",
    "deepspeed",
    "mpirun",
    "mpiexec",
    "orterun",
    "prterun",
    "srun",
    "torch.distributed.run",
];

/// Python modules that launch workers (`python -m MODULE`).
const LAUNCHER_MODULES: [(&str, &str); 4] = [
    ("torch.distributed.run", "torch.distributed.run"),
    ("torch.distributed.launch", "torch.distributed.launch"),
    ("accelerate.commands.launch", "accelerate"),
    ("deepspeed.launcher.runner", "deepspeed"),
];

/// How many parents are followed at most (a loop in a hostile or racing `/proc` ends).
const MAX_DEPTH: usize = 64;

fn base(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The launcher's name if this process is one.
pub(crate) fn launcher_name(ancestor: &Ancestor) -> Option<String> {
    let argv = &ancestor.argv;
    let program = argv.first().map(|a| base(a)).unwrap_or("");
    let is_launcher = |name: &str| LAUNCHERS.contains(&name);
    if is_launcher(program) {
        return Some(program.to_string());
    }
    if program.starts_with("python") {
        if let Some(at) = argv.iter().position(|a| a == "-m") {
            let module = argv.get(at + 1).map(String::as_str).unwrap_or("");
            return LAUNCHER_MODULES
                .iter()
                .find(|(m, _)| *m == module)
                .map(|(_, name)| name.to_string());
        }
    }
    // An interpreter running a launcher's script: `python /usr/bin/torchrun`, `bash ./torchrun`.
    let script = argv
        .iter()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(|a| base(a));
    if let Some(script) = script.filter(|s| is_launcher(s)) {
        return Some(script.to_string());
    }
    is_launcher(&ancestor.comm).then(|| ancestor.comm.clone())
}

/// The nearest ancestor of `pid` that is a launcher: its pid and name. `look(pid)` reads one
/// process of the chain (`None` when it cannot be read).
pub(crate) fn find(pid: u32, look: impl Fn(u32) -> Option<Ancestor>) -> Option<(u32, String)> {
    let mut current = look(pid)?.ppid?;
    for _ in 0..MAX_DEPTH {
        if current <= 1 {
            return None;
        }
        let ancestor = look(current)?;
        if let Some(name) = launcher_name(&ancestor) {
            return Some((current, name));
        }
        current = ancestor.ppid?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn process(ppid: u32, comm: &str, argv: &[&str]) -> Ancestor {
        Ancestor {
            ppid: Some(ppid),
            comm: comm.into(),
            argv: argv.iter().map(|a| a.to_string()).collect(),
        }
    }

    #[test]
    fn launchers_are_known_by_program_module_script_or_comm() {
        let named = |comm: &str, argv: &[&str]| launcher_name(&process(1, comm, argv));
        assert_eq!(
            named(
                "torchrun",
                &[
                    "/opt/venv/bin/python3",
                    "/opt/venv/bin/torchrun",
                    "--nproc-per-node",
                    "8",
                    "train.py"
                ]
            )
            .as_deref(),
            Some("torchrun")
        );
        assert_eq!(
            named(
                "python3",
                &["python3", "-m", "torch.distributed.run", "train.py"]
            )
            .as_deref(),
            Some("torch.distributed.run")
        );
        assert_eq!(
            named(
                "accelerate",
                &[
                    "/usr/bin/python",
                    "/usr/local/bin/accelerate",
                    "launch",
                    "x.py"
                ]
            )
            .as_deref(),
            Some("accelerate")
        );
        assert_eq!(
            named("mpirun", &["mpirun", "-np", "8", "python", "train.py"]).as_deref(),
            Some("mpirun")
        );
        assert_eq!(
            named("srun", &["srun", "python", "train.py"]).as_deref(),
            Some("srun")
        );
        // A shell script named torchrun: the kernel names it as comm.
        assert_eq!(
            named("torchrun", &["/bin/bash", "./torchrun", "w"]).as_deref(),
            Some("torchrun")
        );
        assert_eq!(
            named("python3", &["python3", "train.py", "--torchrun"]),
            None
        );
        assert_eq!(named("python3", &["python3", "-m", "pytest"]), None);
        assert_eq!(named("bash", &["bash"]), None);
    }

    #[test]
    fn the_nearest_launcher_above_the_worker_is_found_and_the_worker_is_not_its_own() {
        let mut tree = HashMap::new();
        tree.insert(500, process(400, "python3", &["python3", "train.py"]));
        tree.insert(
            400,
            process(
                300,
                "torchrun",
                &["python3", "/usr/bin/torchrun", "train.py"],
            ),
        );
        tree.insert(300, process(200, "srun", &["srun", "torchrun", "train.py"]));
        tree.insert(200, process(1, "bash", &["bash"]));
        tree.insert(42, process(41, "torchrun", &["torchrun"]));
        tree.insert(41, process(1, "sshd", &["sshd"]));
        let look = |pid: u32| {
            tree.get(&pid).map(|a| Ancestor {
                ppid: a.ppid,
                comm: a.comm.clone(),
                argv: a.argv.clone(),
            })
        };
        assert_eq!(find(500, look), Some((400, "torchrun".to_string())));
        assert_eq!(find(42, look), None, "a launcher is not its own launcher");
        assert_eq!(find(200, look), None);
        assert_eq!(find(9999, look), None);
    }

    #[test]
    fn a_loop_in_the_parent_chain_ends() {
        let look = |pid: u32| Some(process(if pid == 10 { 11 } else { 10 }, "bash", &["bash"]));
        assert_eq!(find(10, look), None);
    }
}
