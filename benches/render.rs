//! Rendering cost of the monitor's screens on the demo node (target: a full 160x48 frame in
//! under 1 ms), and the cost of taking in one sample (accounting, findings, history).
//!
//! Run: `cargo bench --bench render`.

use criterion::{criterion_group, criterion_main, Criterion};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::hint::black_box;
use strata::app::{Action, State};
use strata::pipeline::Pipeline;
use strata::source::demo::{node_at, DemoSource, SNAPSHOT_AT};
use strata::source::Source;

fn demo_state() -> State {
    let mut source = DemoSource::new(0, 1.0, 10.0, SNAPSHOT_AT);
    let mut state = State::new(Pipeline::new(None), source.label(), 1.0);
    for sample in source.backlog() {
        state.on_sample(sample);
    }
    if let Ok(sample) = source.sample() {
        state.on_sample(sample);
    }
    state
}

fn render(c: &mut Criterion) {
    let mut state = demo_state();
    for (w, h) in [(160u16, 48u16), (80, 24), (250, 70)] {
        let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("backend");
        c.bench_function(&format!("main screen {w}x{h}"), |b| {
            b.iter(|| {
                terminal
                    .draw(|f| strata::ui::draw(f, black_box(&state)))
                    .expect("draw");
            })
        });
    }
    state.apply_action(Action::Open);
    let mut terminal = Terminal::new(TestBackend::new(160, 48)).expect("backend");
    c.bench_function("reconciliation 160x48", |b| {
        b.iter(|| {
            terminal
                .draw(|f| strata::ui::draw(f, black_box(&state)))
                .expect("draw");
        })
    });
}

fn ingest(c: &mut Criterion) {
    let mut pipeline = Pipeline::new(None);
    let mut t = 0.0;
    c.bench_function("ingest one demo sample", |b| {
        b.iter(|| {
            t += 10.0;
            black_box(pipeline.ingest(node_at(0, t, 10.0)));
        })
    });
}

criterion_group!(benches, render, ingest);
criterion_main!(benches);
