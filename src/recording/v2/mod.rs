//! Recording format 2 (`strata.recording/2`, RECORDING.md): raw samples as compact binary
//! records. What rarely changes (a feed's hello, a process's command line and owner, a GPU's
//! identity, the node's versions, counters that stand still) is written when it changes;
//! the moving numbers as deltas in bit-packed columns. A keyframe (the whole sample, written
//! against nothing) begins every zstd frame, every [`KEYFRAME_SECS`] of recording, so that a
//! reader can start at any frame, a seek starts near its target, and each frame reads alone.
//!
//! Each record is framed with its length and a CRC-32: a record cut by a kill or a full disk
//! reads as a cut; a damaged one is said and skipped, and the deltas after it, which refer to
//! a state the reader no longer has, are counted and skipped up to the next keyframe.

mod decode;
mod encode;
mod records;
mod refill;
mod slots;
mod state;
mod wire;

pub(crate) use records::{Raw, Records};

use crate::sample::NodeSample;

/// What begins every frame of a format-2 recording (after decompression): the schema's name
/// and a newline, so that `zstdcat FILE | head -c 19` says what the file is.
pub(crate) const MAGIC: &[u8] = b"strata.recording/2\n";
/// Recording seconds between keyframes (and so between frames).
pub(crate) const KEYFRAME_SECS: f64 = 300.0;

/// A keyframe: the whole sample, against nothing.
pub(crate) const KEYFRAME: u8 = b'K';
/// A sample written against the one before it.
pub(crate) const DELTA: u8 = b'S';

/// The bytes of one record: tag, length, payload, and the CRC-32 of all three.
pub(crate) fn frame(tag: u8, payload: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.push(tag);
    wire::put_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = flate2::Crc::new();
    crc.update(bytes);
    crc.sum()
}

/// Writes samples as records, remembering what each record leaves for the next.
#[derive(Debug, Default)]
pub(crate) struct Encoder {
    state: state::State,
    /// The time of the last keyframe.
    keyframe_at: Option<f64>,
}

impl Encoder {
    pub(crate) fn new() -> Self {
        Encoder::default()
    }

    /// Whether `sample` should be written as a keyframe: the first, or one
    /// [`KEYFRAME_SECS`] or more after the last keyframe (or before it: a clock set back).
    pub(crate) fn wants_keyframe(&self, sample: &NodeSample) -> bool {
        match self.keyframe_at {
            None => true,
            Some(at) => !(sample.time - at < KEYFRAME_SECS && sample.time >= at),
        }
    }

    /// Appends `sample` to `out`: a keyframe (the magic, then the whole sample) when asked,
    /// else a delta against the sample before.
    pub(crate) fn encode(&mut self, sample: &NodeSample, keyframe: bool, out: &mut Vec<u8>) {
        if keyframe || self.keyframe_at.is_none() {
            self.state = state::State::default();
            self.keyframe_at = Some(sample.time);
            out.extend_from_slice(MAGIC);
            let payload = encode::encode(&mut self.state, sample);
            frame(KEYFRAME, &payload, out);
        } else {
            let payload = encode::encode(&mut self.state, sample);
            frame(DELTA, &payload, out);
        }
    }

    /// Forgets the state: the next sample is a keyframe (a new frame, a new file).
    pub(crate) fn reset(&mut self) {
        self.state = state::State::default();
        self.keyframe_at = None;
    }
}

/// Samples a [`Decoder`] keeps to decode into: a reader whose samples come back in bursts
/// (judged on another thread) still has one for each.
const SPARES: usize = 16;

/// Reads records back into samples.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    /// `None` until a keyframe is read, and after a record was lost: deltas then refer to a
    /// state this reader never saw.
    state: Option<state::State>,
    /// Samples given back once used ([`Decoder::recycle`]), at most [`SPARES`]: the next
    /// samples are decoded into them. Boxed as they come and go ([`Decoded::Sample`]).
    #[allow(clippy::vec_box)]
    spares: Vec<Box<NodeSample>>,
}

/// What a record gave.
#[derive(Debug)]
pub(crate) enum Decoded {
    Sample(Box<NodeSample>),
    /// A delta without the state it refers to (its keyframe lost): skipped.
    Unanchored,
    /// A record that does not read: why. The state is lost with it.
    Bad(String),
}

impl Decoder {
    pub(crate) fn new() -> Self {
        Decoder::default()
    }

    /// The state is lost (data skipped): deltas wait for the next keyframe.
    pub(crate) fn lose_state(&mut self) {
        self.state = None;
    }

    /// Gives back a sample this decoder yielded, once used: the next is decoded into it,
    /// reusing its strings and vectors.
    pub(crate) fn recycle(&mut self, sample: Box<NodeSample>) {
        if self.spares.len() < SPARES {
            self.spares.push(sample);
        }
    }

    pub(crate) fn decode(&mut self, tag: u8, payload: &[u8]) -> Decoded {
        let state = match tag {
            KEYFRAME => self.state.insert(state::State::default()),
            DELTA => match self.state.as_mut() {
                Some(state) => state,
                None => return Decoded::Unanchored,
            },
            other => {
                self.state = None;
                return Decoded::Bad(format!("a record of unknown kind {other:#04x}"));
            }
        };
        match decode::decode(state, payload, self.spares.pop()) {
            Ok(sample) => Decoded::Sample(sample),
            Err(e) => {
                self.state = None;
                Decoded::Bad(format!("a record that does not read: {e}"))
            }
        }
    }
}

#[cfg(test)]
mod tests;
