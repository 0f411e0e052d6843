//! Owners in the monitor, in a real pseudo-terminal on the demo node: the OWNER column where
//! the width allows (200 columns, not 120), `g` cycling the table's grouping with a group row
//! per device and its members under it, and Enter on a group row opening the group.

use crate::common;

use common::tmux::Pane;
use common::{strata, wait_until};
use std::time::Duration;

fn demo(name: &str, width: u16, height: u16) -> Pane {
    let command = format!("{} --demo --demo-at 905 --interval 0.5", strata());
    let pane = Pane::start(name, &command, width, height);
    pane.wait_for(&["Processes (9)"], Duration::from_secs(15))
        .unwrap_or_else(|s| panic!("the table is missing:\n{s}"));
    pane
}

#[test]
fn the_owner_column_shows_where_the_width_allows() {
    let wide = demo("owner-200", 200, 50);
    let screen = wide
        .wait_for(
            &[
                "OWNER",
                "slurm 81234.0",
                "pod serving/t5-3b-0",
                "docker carol-finetu",
            ],
            Duration::from_secs(10),
        )
        .unwrap_or_else(|s| panic!("no owners at 200 columns:\n{s}"));
    assert!(screen.contains("unit embeddings.ser"), "{screen}");
    wide.quit();
    let narrow = demo("owner-120", 120, 40);
    let screen = narrow.capture();
    assert!(
        !screen.contains("OWNER"),
        "no room at 120 columns:\n{screen}"
    );
    assert!(
        screen.contains("python train.py"),
        "the command keeps its room:\n{screen}"
    );
    narrow.quit();
}

#[test]
fn g_cycles_the_grouping_and_enter_opens_a_group() {
    // Tall enough for every group row and member under the GPU panels.
    let pane = demo("owner-group", 200, 72);
    pane.keys(&["g"]);
    pane.wait_for(
        &["grouped by launcher", "torchrun 41200", "└41230"],
        Duration::from_secs(10),
    )
    .unwrap_or_else(|s| panic!("no launcher groups:\n{s}"));
    pane.keys(&["g"]);
    pane.wait_for(
        &[
            "grouped by pod",
            "pod serving/t5-3b-0",
            "pod serving/triton-0",
        ],
        Duration::from_secs(10),
    )
    .unwrap_or_else(|s| panic!("no pod groups:\n{s}"));
    pane.keys(&["g"]);
    pane.wait_for(
        &["grouped by slurm", "slurm 81234"],
        Duration::from_secs(10),
    )
    .unwrap_or_else(|s| panic!("no Slurm groups:\n{s}"));
    pane.keys(&["g"]);
    pane.wait_for(&["grouped by user", "user mlteam"], Duration::from_secs(10))
        .unwrap_or_else(|s| panic!("no user groups:\n{s}"));
    // The selection starts on the first group row: Enter opens it.
    pane.keys(&["Enter"]);
    pane.wait_for(
        &["Group · user", "grouped by user", "summed over the members"],
        Duration::from_secs(10),
    )
    .unwrap_or_else(|s| panic!("the group view is missing:\n{s}"));
    pane.keys(&["Escape"]);
    // The group view's title says "grouped by user" too: back is the table's title, and
    // the group view gone (a `g` sent while the Escape is still unread would arrive with
    // it as Alt-g, and the Escape be lost).
    pane.wait_for(&["Processes (", "grouped by user"], Duration::from_secs(10))
        .unwrap_or_else(|s| panic!("not back:\n{s}"));
    wait_until(Duration::from_secs(10), "the group view to go", || {
        !pane.capture().contains("Group · user")
    });
    pane.keys(&["g"]);
    // The title said "sorted by used ▼" while grouped too: wait for the grouping to go.
    wait_until(Duration::from_secs(10), "the grouping to go", || {
        !pane.capture().contains("grouped by")
    });
    pane.wait_for(&["sorted by used ▼"], Duration::from_secs(10))
        .unwrap_or_else(|s| panic!("not sorted by used:\n{s}"));
    pane.quit();
}
