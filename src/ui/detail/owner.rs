//! Who the process belongs to, in the reconciliation view: every field of its owner with
//! where it was read, and what could not be read with why.

use super::Rows;
use crate::sample::owner::Owner;
use crate::sample::ProcessSample;
use crate::text::clean;
use crate::ui::theme::Theme;
use ratatui::style::Style;

/// The owner's fields in the order an operator asks for them, with their labels.
fn fields(owner: &Owner) -> Vec<(&'static str, &'static str, String)> {
    let mut out = Vec::new();
    let mut put = |label: &'static str, key: &'static str, value: &Option<String>| {
        if let Some(v) = value {
            out.push((label, key, v.clone()));
        }
    };
    put("namespace", "namespace", &owner.namespace);
    put("pod", "pod", &owner.pod);
    put("pod uid", "pod_uid", &owner.pod_uid);
    put("container", "container", &owner.container);
    put("container id", "container_id", &owner.container_id);
    put("runtime", "runtime", &owner.runtime);
    put("slurm job", "slurm_job", &owner.slurm_job);
    put("slurm step", "slurm_step", &owner.slurm_step);
    put("slurm task", "slurm_task", &owner.slurm_task);
    put("slurm user", "slurm_user", &owner.slurm_user);
    put("rank", "rank", &owner.rank);
    put("local rank", "local_rank", &owner.local_rank);
    put("world size", "world_size", &owner.world_size);
    put("run", "run_id", &owner.run_id);
    put("unit", "unit", &owner.unit);
    let launcher = owner
        .launcher_pid
        .map(|pid| format!("{} {pid}", owner.launcher.as_deref().unwrap_or("launcher")));
    put("launcher", "launcher_pid", &launcher);
    out
}

/// The owner section.
pub(super) fn section(rows: &mut Rows, p: &ProcessSample, theme: Theme) {
    rows.blank();
    let Some(owner) = p.owner.as_deref() else {
        let why = if p.visible {
            "owner: n/a (not read)"
        } else {
            "owner: n/a (this /proc does not show the process)"
        };
        rows.text(why.into(), theme.dim());
        return;
    };
    let kind = match owner.short() {
        Some(short) => format!("owner: {} ({})", clean(&short), owner.kind.as_str()),
        None => "owner: none (no pod, container, Slurm step, unit or launcher names it)".into(),
    };
    rows.text(kind, theme.title());
    for (label, key, value) in fields(owner) {
        let source = owner.source.get(key).map_or("", String::as_str);
        rows.text(
            format!("  {label:<13} {}  · from {}", clean(&value), clean(source)),
            Style::new(),
        );
    }
    for (what, why) in &owner.unreadable {
        rows.text(
            format!("  {:<13} n/a: {}", clean(what), clean(why)),
            theme.dim(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::owner::from;

    #[test]
    fn every_named_field_is_listed_with_its_source() {
        let mut owner = Owner::default();
        owner.set("pod_uid", "u-1".into(), from::CGROUP);
        owner.set("pod", "llama-0".into(), from::POD_LOGS);
        owner.launcher_pid = Some(7);
        owner.set("launcher", "torchrun".into(), from::PROCESS_TREE);
        let listed = fields(&owner);
        let keys: Vec<&str> = listed.iter().map(|(_, k, _)| *k).collect();
        assert_eq!(keys, ["pod", "pod_uid", "launcher_pid"]);
        assert_eq!(listed[2].2, "torchrun 7");
    }
}
