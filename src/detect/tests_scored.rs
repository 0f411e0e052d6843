//! The defects a second outside scoring on labelled recordings found, each as the pipeline
//! meets it.

use super::tests_defects::{fed_node, pool};
use super::*;
use crate::fixtures::*;
use crate::pipeline::Pipeline;
use crate::sample::feed::FeedState;

/// A fed process that exits: NVML stops listing it at once, while the monitor keeps its
/// closed feed (with the last statistics) for up to a minute.
#[test]
fn the_closed_feed_of_a_process_that_exited_is_not_a_device_unlisted() {
    let mut pipeline = Pipeline::new(None);
    let running = fed_node(1000.0, 80 * GIB, GIB, pool(20 * GIB, 30 * GIB, GIB));
    assert!(pipeline
        .ingest(running.clone())
        .findings
        .iter()
        .all(|f| f.kind != FindingKind::FeedDeviceUnlisted));
    for i in 1..=12u32 {
        let mut exited = running.clone();
        exited.time += 5.0 * f64::from(i);
        exited.processes.clear();
        exited.gpus[0].memory = Some(memory(80 * GIB, 0));
        exited.feeds[0].state = FeedState::Closed {
            reason: "the agent said bye".into(),
        };
        let observed = pipeline.ingest(exited);
        let unlisted: Vec<&Finding> = observed
            .findings
            .iter()
            .filter(|f| f.kind == FindingKind::FeedDeviceUnlisted)
            .collect();
        assert!(
            unlisted.is_empty(),
            "{}s after the exit: {unlisted:#?}",
            5 * i
        );
    }
}
