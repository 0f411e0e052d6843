//! Step-end readings of one process: memory against training step. The agent takes a
//! reading at the end of a step (at most one every 0.2 s, at least one every 50 steps), when
//! that step's own tensors are freed: its saw-tooth is gone, and what stays is what the job
//! keeps from step to step. Kept as their own series, indexed by step rather than by time,
//! bounded: the latest [`STEP_POINTS`].

use std::collections::VecDeque;

/// Step-end readings kept per process at most (24 bytes each).
pub(crate) const STEP_POINTS: usize = 1024;

/// One step-end reading.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct StepPoint {
    /// Steps completed.
    pub(crate) step: u64,
    /// When it was read (unix seconds).
    pub(crate) time: f64,
    /// Live tensor bytes at the step's end.
    pub(crate) allocated: u64,
    /// The pool at the step's end; `None` where the allocator does not report it.
    pub(crate) reserved: Option<u64>,
    /// The allocator's own peak of live bytes at that reading (since start or reset).
    pub(crate) peak_allocated: Option<u64>,
}

/// The step-end readings of one process on one device, oldest first.
#[derive(Debug, Clone, Default)]
pub(crate) struct Steps {
    points: VecDeque<StepPoint>,
    /// The first reading of this run (of this count of steps), kept after the bounded
    /// readings let it go: how long the job has run is judged from it.
    began: Option<StepPoint>,
}

impl Steps {
    /// Adds a reading. A later step goes on the end; the same step again replaces its reading
    /// when later; a reading out of order is dropped; a lower step is a new count (a new run
    /// in the same process): what came before is not compared with it, and is let go.
    pub(crate) fn push(&mut self, point: StepPoint) {
        if !point.time.is_finite() {
            return;
        }
        if let Some(last) = self.points.back_mut() {
            if point.time <= last.time {
                return;
            } else if point.step < last.step {
                self.points.clear();
                self.began = Some(point);
            } else if point.step == last.step {
                *last = point;
                return;
            }
        }
        if self.points.len() == STEP_POINTS {
            self.points.pop_front();
        }
        self.began.get_or_insert(point);
        self.points.push_back(point);
    }

    pub(crate) fn points(&self) -> &VecDeque<StepPoint> {
        &self.points
    }

    pub(crate) fn last(&self) -> Option<&StepPoint> {
        self.points.back()
    }

    /// A copy of the readings from step `from` on.
    pub(crate) fn copy_from_step(&self, from: u64) -> Steps {
        Steps {
            points: self.since_step(from).copied().collect(),
            began: self.began,
        }
    }

    /// The first reading of this run, where the readings kept may have let it go.
    pub(crate) fn began(&self) -> Option<&StepPoint> {
        self.began.as_ref()
    }

    /// The readings from step `from` on (oldest first).
    pub(crate) fn since_step(&self, from: u64) -> impl Iterator<Item = &StepPoint> + '_ {
        let skip = self.points.partition_point(|p| p.step < from);
        self.points.range(skip..)
    }

    pub(crate) fn len(&self) -> usize {
        self.points.len()
    }

    /// Bytes held at full capacity.
    pub(crate) fn footprint(&self) -> usize {
        STEP_POINTS * std::mem::size_of::<StepPoint>()
    }

    /// Steps per second over the readings from step `from` on, where they span time.
    #[cfg(test)]
    pub(crate) fn pace(&self, from: u64) -> Option<f64> {
        let first = self.since_step(from).next()?;
        let last = self.points.back()?;
        let secs = last.time - first.time;
        (secs > 0.0 && last.step > first.step).then(|| (last.step - first.step) as f64 / secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(step: u64, time: f64) -> StepPoint {
        StepPoint {
            step,
            time,
            allocated: step,
            reserved: Some(0),
            peak_allocated: None,
        }
    }

    #[test]
    fn steps_are_kept_in_order_bounded_and_a_new_count_starts_afresh() {
        let mut s = Steps::default();
        for i in 0..(STEP_POINTS as u64 + 10) {
            s.push(at(i * 4, i as f64 * 0.2));
        }
        assert_eq!(s.len(), STEP_POINTS);
        assert_eq!(s.points()[0].step, 40);
        s.push(at(1, 0.0)); // out of order in time: dropped
        assert_eq!(s.len(), STEP_POINTS);
        let last = s.last().copied().expect("last");
        s.push(StepPoint {
            allocated: 7,
            time: last.time + 0.1,
            ..last
        });
        assert_eq!(
            (s.len(), s.last().map(|p| p.allocated)),
            (STEP_POINTS, Some(7))
        );
        assert!((s.pace(0).expect("pace") - 20.0).abs() < 0.5);
        assert_eq!(s.since_step(last.step - 8).count(), 3);
        assert_eq!(
            s.began().map(|p| p.step),
            Some(0),
            "the run's first reading is kept"
        );
        s.push(at(3, 1e6));
        assert_eq!(s.len(), 1, "a lower step is a new count");
        assert_eq!(s.began().map(|p| p.step), Some(3), "...and begins afresh");
    }
}
