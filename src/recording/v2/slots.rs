//! One numeric field of one thing (a process's `used`, a feed's `allocated`...), followed
//! from record to record: what the writer and the reader both remember of it, and how each
//! new value is said against that.
//!
//! An integer is said as the same as before, the last step again, a delta in the field's own
//! granularity (most byte figures are multiples of 512 or of 2 MiB: the zero bits are not
//! written), a delta, or unknown. A float is said as the same bits, unknown, a decimal with
//! up to 9 digits after the point (what `62.3` or a microsecond count is), or its bits'
//! distance from the last value or from the line through the last two (a clock's reading).
//! Every float is read back to the same bits.

use super::wire::{err, unzigzag, width, zigzag, ColumnsIn, ColumnsOut, Reader, Result};

/// Exact powers of ten as f64 (all of them are, to 10^22).
const P10: [f64; 10] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9];
/// The largest integer an f64 holds exactly.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// An integer field's memory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IntSlot {
    /// The last known value (kept through unknowns).
    base: u64,
    /// The last step taken.
    step: i64,
    /// The granularity of the deltas: the zero bits below them (64: not known yet).
    shift: u32,
}

impl Default for IntSlot {
    fn default() -> Self {
        IntSlot {
            base: 0,
            step: 0,
            shift: 64,
        }
    }
}

mod int_code {
    pub(crate) const SAME: u8 = 0;
    pub(crate) const STEP: u8 = 1;
    pub(crate) const SHIFTED: u8 = 2;
    pub(crate) const DELTA: u8 = 3;
    pub(crate) const UNKNOWN: u8 = 4;
    /// A peak: the larger of the last value and the figure it is the peak of.
    pub(crate) const RUNNING_MAX: u8 = 5;
    /// A distance, in the slot's granularity, from the last value scaled as a reference
    /// figure of the same reading moved (see [`super::IntSlot::ratio`]).
    pub(crate) const RATIO: u8 = 6;
}

/// A reference figure of the same reading, read before the one it predicts: its last
/// known value before this reading, and its value in it.
pub(crate) type Reference = Option<(u64, u64)>;

impl IntSlot {
    pub(crate) fn put(
        &mut self,
        value: Option<u64>,
        column: usize,
        control: &mut Vec<u8>,
        cols: &mut ColumnsOut,
    ) {
        self.put_peak(value, None, column, control, cols);
    }

    /// The last known value.
    pub(crate) fn last(&self) -> u64 {
        self.base
    }

    /// The last value scaled as the reference moved (`base x now / before`), rounded to the
    /// slot's granularity: what a figure that keeps its ratio to the reference would be.
    fn ratio(&self, reference: Reference) -> Option<u64> {
        let (before, now) = reference?;
        if before == 0 || self.shift >= 64 {
            return None;
        }
        let (before, now) = (u128::from(before), u128::from(now));
        let scaled = (u128::from(self.base) * now + before / 2) / before;
        let g = 1u128 << self.shift;
        u64::try_from((scaled + g / 2) / g * g).ok()
    }

    /// [`IntSlot::put`] of a figure that may keep its ratio to `reference`: said as its
    /// distance from [`IntSlot::ratio`] where that payload is narrower than a delta's.
    pub(crate) fn put_ratio(
        &mut self,
        value: Option<u64>,
        reference: Reference,
        column: usize,
        control: &mut Vec<u8>,
        cols: &mut ColumnsOut,
    ) {
        if let (Some(v), Some(pred)) = (value, self.ratio(reference)) {
            let d = v.wrapping_sub(self.base) as i64;
            let r = v.wrapping_sub(pred) as i64;
            let plain = if d.trailing_zeros() >= self.shift {
                width(zigzag(d >> self.shift))
            } else {
                width(zigzag(d))
            };
            if d != 0 && d != self.step && r.trailing_zeros() >= self.shift {
                let payload = zigzag(r >> self.shift);
                if width(payload) < plain {
                    control.push(int_code::RATIO);
                    cols.push(column, payload);
                    self.step = d;
                    self.base = v;
                    return;
                }
            }
        }
        self.put(value, column, control, cols);
    }

    /// [`IntSlot::put`] of a peak, with the figure it is the peak of (`of`): a new peak that
    /// is that figure costs no payload.
    pub(crate) fn put_peak(
        &mut self,
        value: Option<u64>,
        of: Option<u64>,
        column: usize,
        control: &mut Vec<u8>,
        cols: &mut ColumnsOut,
    ) {
        use int_code::*;
        if let (Some(v), Some(of)) = (value, of) {
            if v != self.base && v == self.base.max(of) {
                control.push(RUNNING_MAX);
                self.step = v.wrapping_sub(self.base) as i64;
                self.base = v;
                return;
            }
        }
        let Some(v) = value else {
            control.push(UNKNOWN);
            return;
        };
        let d = v.wrapping_sub(self.base) as i64;
        if d == 0 {
            control.push(SAME);
        } else if d == self.step {
            control.push(STEP);
        } else if self.shift < 64 && d.trailing_zeros() >= self.shift {
            control.push(SHIFTED);
            cols.push(column, zigzag(d >> self.shift));
        } else {
            control.push(DELTA);
            cols.push(column, zigzag(d));
            self.shift = d.trailing_zeros();
        }
        if d != 0 {
            self.step = d;
        }
        self.base = v;
    }

    pub(crate) fn get(
        &mut self,
        column: usize,
        control: &mut Reader<'_>,
        cols: &mut ColumnsIn<'_>,
    ) -> Result<Option<u64>> {
        self.get_peak(None, None, column, control, cols)
    }

    /// [`IntSlot::get`] of a peak written by [`IntSlot::put_peak`] with `of`.
    /// A figure written by [`IntSlot::put_ratio`] is read with its `reference`.
    #[inline(always)]
    pub(crate) fn get_peak(
        &mut self,
        of: Option<u64>,
        reference: Reference,
        column: usize,
        control: &mut Reader<'_>,
        cols: &mut ColumnsIn<'_>,
    ) -> Result<Option<u64>> {
        let code = control.byte()?;
        self.get_code(code, of, reference, column, cols)
    }

    /// [`IntSlot::get_peak`] of a figure whose code was read already (with those of the
    /// figures beside it, in one read).
    #[inline(always)]
    pub(crate) fn get_code(
        &mut self,
        code: u8,
        of: Option<u64>,
        reference: Reference,
        column: usize,
        cols: &mut ColumnsIn<'_>,
    ) -> Result<Option<u64>> {
        // Most figures of most readings are as before, unknown, or one step on: read here,
        // where the call inlines, without the cost of a call for each.
        match code {
            int_code::SAME => Ok(Some(self.base)),
            int_code::UNKNOWN => Ok(None),
            int_code::STEP => {
                self.base = self.base.wrapping_add(self.step as u64);
                Ok(Some(self.base))
            }
            code => self.get_coded(code, of, reference, column, cols),
        }
    }

    /// [`IntSlot::get_peak`] of a figure said with `code`, other than the three it reads
    /// itself.
    #[inline(never)]
    fn get_coded(
        &mut self,
        code: u8,
        of: Option<u64>,
        reference: Reference,
        column: usize,
        cols: &mut ColumnsIn<'_>,
    ) -> Result<Option<u64>> {
        use int_code::*;
        let d = match code {
            RUNNING_MAX => {
                let of = of
                    .ok_or_else(|| super::wire::WireError("a peak of a figure not known".into()))?;
                let v = self.base.max(of);
                v.wrapping_sub(self.base) as i64
            }
            RATIO => {
                let pred = self
                    .ratio(reference)
                    .ok_or_else(|| super::wire::WireError("a ratio to no reference".into()))?;
                let r = unzigzag(cols.get(column)?) << self.shift;
                pred.wrapping_add(r as u64).wrapping_sub(self.base) as i64
            }
            SAME => 0,
            STEP => self.step,
            SHIFTED if self.shift < 64 => unzigzag(cols.get(column)?) << self.shift,
            DELTA => {
                let d = unzigzag(cols.get(column)?);
                if d == 0 {
                    return err("a zero delta said as a delta");
                }
                self.shift = d.trailing_zeros();
                d
            }
            UNKNOWN => return Ok(None),
            other => return err(format!("an integer said as {other}")),
        };
        if d != 0 {
            self.step = d;
        }
        self.base = self.base.wrapping_add(d as u64);
        Ok(Some(self.base))
    }

    pub(crate) fn get_u64(
        &mut self,
        column: usize,
        control: &mut Reader<'_>,
        cols: &mut ColumnsIn<'_>,
    ) -> Result<u64> {
        self.get(column, control, cols)?
            .ok_or_else(|| super::wire::WireError("a known number said as unknown".into()))
    }
}

/// A float field's memory: the last two known values' bits.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FloatSlot {
    last: Option<u64>,
    before: Option<u64>,
    /// The last value's distance, in bits, from the reference it was given with.
    offset: Option<u64>,
}

mod float_code {
    pub(crate) const SAME: u8 = 0;
    pub(crate) const UNKNOWN: u8 = 1;
    /// `DECIMAL + d`: a decimal with `d` digits after the point (0 to 9).
    pub(crate) const DECIMAL: u8 = 2;
    pub(crate) const LINE: u8 = 12;
    pub(crate) const NEAR: u8 = 13;
    pub(crate) const RAW: u8 = 14;
    /// As far from the reference (the sample's time) as the last value was.
    pub(crate) const OFFSET: u8 = 15;
    /// As far from the reference as the value at the same place in the sample before was
    /// (a feed's latest reading against its latest, the one before against the one before).
    pub(crate) const OFFSET_AT_PLACE: u8 = 16;
}

/// `x` as `n / 10^d`, exactly, where it is one.
fn decimal(x: f64, d: usize) -> Option<i64> {
    let n = (x * P10[d]).round();
    // Not finite, or too large to be exact as an integer.
    if !n.is_finite() || n.abs() >= EXACT {
        return None;
    }
    // From the integer, as the reader computes it (so -0.0 is not one).
    let n = n as i64;
    ((n as f64 / P10[d]).to_bits() == x.to_bits()).then_some(n)
}

impl FloatSlot {
    fn remember(&mut self, bits: u64) {
        if self.last != Some(bits) {
            self.before = self.last;
            self.last = Some(bits);
        }
    }

    /// The line through the last two values, one step on, in bits.
    fn line(&self) -> Option<u64> {
        let (a, b) = (self.last?, self.before?);
        Some(a.wrapping_add(a.wrapping_sub(b)))
    }

    pub(crate) fn put(
        &mut self,
        value: Option<f64>,
        column: usize,
        control: &mut Vec<u8>,
        cols: &mut ColumnsOut,
    ) {
        self.put_near(value, None, column, control, cols);
    }

    /// [`FloatSlot::put`] with a reference (the sample's time, for a time of the agent's):
    /// a value as far from it as the last one was costs little.
    pub(crate) fn put_near(
        &mut self,
        value: Option<f64>,
        reference: Option<f64>,
        column: usize,
        control: &mut Vec<u8>,
        cols: &mut ColumnsOut,
    ) {
        self.put_near_place(value, reference, None, column, control, cols);
    }

    /// [`FloatSlot::put_near`], with `place`: the offset from the reference, in bits, of the
    /// value at the same place in the sample before (several readings through one slot).
    pub(crate) fn put_near_place(
        &mut self,
        value: Option<f64>,
        reference: Option<f64>,
        place: Option<u64>,
        column: usize,
        control: &mut Vec<u8>,
        cols: &mut ColumnsOut,
    ) {
        use float_code::*;
        let reference = reference.map(f64::to_bits);
        let Some(x) = value else {
            control.push(UNKNOWN);
            return;
        };
        let bits = x.to_bits();
        let offset = reference.map(|r| bits.wrapping_sub(r));
        if self.last == Some(bits) {
            control.push(SAME);
            self.offset = offset.or(self.offset);
            return;
        }
        // The cheapest way to say it: the fewest payload bits.
        let mut best: (u8, u64, u32) = (RAW, bits, 65);
        let mut consider = |code: u8, payload: u64| {
            if width(payload) < best.2 {
                best = (code, payload, width(payload));
            }
        };
        if let Some(d) = (0..P10.len()).find(|&d| decimal(x, d).is_some()) {
            let n = decimal(x, d).unwrap_or(0);
            let before = self
                .last
                .and_then(|b| decimal(f64::from_bits(b), d))
                .unwrap_or(0);
            consider(DECIMAL + d as u8, zigzag(n.wrapping_sub(before)));
        }
        if let Some(line) = self.line() {
            consider(LINE, zigzag(bits.wrapping_sub(line) as i64));
        }
        if let Some(last) = self.last {
            consider(NEAR, zigzag(bits.wrapping_sub(last) as i64));
        }
        if let (Some(now), Some(before)) = (offset, self.offset) {
            consider(OFFSET, zigzag(now.wrapping_sub(before) as i64));
        }
        if let (Some(now), Some(before)) = (offset, place) {
            consider(OFFSET_AT_PLACE, zigzag(now.wrapping_sub(before) as i64));
        }
        control.push(best.0);
        cols.push(column, best.1);
        self.remember(bits);
        self.offset = offset.or(self.offset);
    }

    pub(crate) fn get(
        &mut self,
        column: usize,
        control: &mut Reader<'_>,
        cols: &mut ColumnsIn<'_>,
    ) -> Result<Option<f64>> {
        self.get_near(None, column, control, cols)
    }

    /// [`FloatSlot::get`] of a value written by [`FloatSlot::put_near`] with `reference`.
    pub(crate) fn get_near(
        &mut self,
        reference: Option<f64>,
        column: usize,
        control: &mut Reader<'_>,
        cols: &mut ColumnsIn<'_>,
    ) -> Result<Option<f64>> {
        self.get_near_place(reference, None, column, control, cols)
    }

    /// [`FloatSlot::get`] of a value written by [`FloatSlot::put_near_place`].
    pub(crate) fn get_near_place(
        &mut self,
        reference: Option<f64>,
        place: Option<u64>,
        column: usize,
        control: &mut Reader<'_>,
        cols: &mut ColumnsIn<'_>,
    ) -> Result<Option<f64>> {
        use float_code::*;
        let reference = reference.map(f64::to_bits);
        let code = control.byte()?;
        let bits = match code {
            SAME => self
                .last
                .ok_or_else(|| super::wire::WireError("the same float as none".into()))?,
            UNKNOWN => return Ok(None),
            c if (DECIMAL..DECIMAL + P10.len() as u8).contains(&c) => {
                let d = usize::from(c - DECIMAL);
                let before = self
                    .last
                    .and_then(|b| decimal(f64::from_bits(b), d))
                    .unwrap_or(0);
                let n = before.wrapping_add(unzigzag(cols.get(column)?));
                if (n as f64).abs() >= EXACT {
                    return err("a decimal float out of range");
                }
                (n as f64 / P10[d]).to_bits()
            }
            LINE => {
                let line = self
                    .line()
                    .ok_or_else(|| super::wire::WireError("a float on a line of one".into()))?;
                line.wrapping_add(unzigzag(cols.get(column)?) as u64)
            }
            NEAR => {
                let last = self
                    .last
                    .ok_or_else(|| super::wire::WireError("a float near none".into()))?;
                last.wrapping_add(unzigzag(cols.get(column)?) as u64)
            }
            RAW => cols.get(column)?,
            OFFSET => {
                let (Some(r), Some(before)) = (reference, self.offset) else {
                    return err("a float off a reference not known");
                };
                r.wrapping_add(before)
                    .wrapping_add(unzigzag(cols.get(column)?) as u64)
            }
            OFFSET_AT_PLACE => {
                let (Some(r), Some(before)) = (reference, place) else {
                    return err("a float off a place not known");
                };
                r.wrapping_add(before)
                    .wrapping_add(unzigzag(cols.get(column)?) as u64)
            }
            other => return err(format!("a float said as {other}")),
        };
        self.remember(bits);
        self.offset = reference.map(|r| bits.wrapping_sub(r)).or(self.offset);
        Ok(Some(f64::from_bits(bits)))
    }

    pub(crate) fn get_f64(
        &mut self,
        column: usize,
        control: &mut Reader<'_>,
        cols: &mut ColumnsIn<'_>,
    ) -> Result<f64> {
        self.get(column, control, cols)?
            .ok_or_else(|| super::wire::WireError("a known float said as unknown".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::{ColumnsIn, ColumnsOut, Reader};
    use super::*;

    /// A feed's readings at fixed places against the sample's time (its agent sampling in
    /// step with the monitor), two through one slot: each costs a few bits once its place is
    /// known, however the sample times jitter, and reads back to the same bits.
    #[test]
    fn readings_at_the_same_places_cost_a_few_bits_however_the_sample_time_jitters() {
        let mut out = FloatSlot::default();
        let mut places = [None; 2];
        let mut control = Vec::new();
        let mut cols = ColumnsOut::new(1);
        let mut written = Vec::new();
        for k in 0..100u64 {
            let sample_time = 1.767e9 + k as f64 + 0.004 * crate::fixtures::noise(k, 1).abs();
            for (place, back) in [(1usize, 0.7), (0, 0.2)] {
                let v = sample_time - back;
                let at = places[place];
                out.put_near_place(Some(v), Some(sample_time), at, 0, &mut control, &mut cols);
                places[place] = Some(v.to_bits().wrapping_sub(sample_time.to_bits()));
                written.push((v, sample_time, at));
            }
        }
        let (mut table, mut packed) = (Vec::new(), Vec::new());
        cols.finish(&mut table, &mut packed);
        // Said from the line through the last two, each would take the sample time's jitter
        // (about 14 bits): 350 bytes and more.
        assert!(packed.len() <= 160, "{} bytes", packed.len());
        let mut table = Reader::new(&table);
        let mut cols = ColumnsIn::read(1, 1, &mut table, &packed).expect("columns");
        let mut control = Reader::new(&control);
        let mut back = FloatSlot::default();
        for (v, sample_time, at) in written {
            let read = back.get_near_place(Some(sample_time), at, 0, &mut control, &mut cols);
            assert_eq!(read.map(|r| r.map(f64::to_bits)), Ok(Some(v.to_bits())));
        }
    }

    /// A figure that keeps its ratio to a figure of its reading read before it (a share of
    /// `allocated`) costs a few bits where its own deltas take the reference's noise, and
    /// every value reads back, also against references of 0, unknown, or too large to scale.
    #[test]
    fn a_figure_that_keeps_its_ratio_to_its_reference_costs_a_few_bits() {
        let mut references: Vec<Option<u64>> = (0..200u64)
            .map(|k| {
                let noise = 20.0 * 1048576.0 * crate::fixtures::noise(3, k);
                Some((8e9 + noise) as u64 / 512 * 512)
            })
            .collect();
        let figure = |r: u64| r / 97 / 8 * 8;
        let mut values: Vec<Option<u64>> = references.iter().map(|r| r.map(figure)).collect();
        let plain = {
            let (mut slot, mut control, mut cols) =
                (IntSlot::default(), Vec::new(), ColumnsOut::new(1));
            for &v in &values {
                slot.put(v, 0, &mut control, &mut cols);
            }
            let (mut table, mut packed) = (Vec::new(), Vec::new());
            cols.finish(&mut table, &mut packed);
            packed.len()
        };
        // Hostile turns after the steady run: a reference of 0, an unknown one, an unknown
        // figure, and values whose scaling passes u64.
        references.extend([
            Some(0),
            Some(5),
            None,
            Some(7),
            Some(u64::MAX),
            Some(1),
            Some(u64::MAX),
        ]);
        values.extend([
            Some(0),
            Some(512),
            Some(1024),
            None,
            Some(u64::MAX - 511),
            Some(3),
            Some(u64::MAX),
        ]);
        let (mut r_slot, mut slot) = (IntSlot::default(), IntSlot::default());
        // The reference is said in columns of its own, so `packed` is the figure's alone.
        let (mut r_control, mut r_cols) = (Vec::new(), ColumnsOut::new(1));
        let (mut control, mut cols) = (Vec::new(), ColumnsOut::new(2));
        let mut said = Vec::new();
        for (&r, &v) in references.iter().zip(&values) {
            let before = r_slot.last();
            r_slot.put(r, 0, &mut r_control, &mut r_cols);
            let reference = r.map(|now| (before, now));
            slot.put_ratio(v, reference, 1, &mut control, &mut cols);
            said.push(reference);
        }
        let (mut table, mut packed) = (Vec::new(), Vec::new());
        cols.finish(&mut table, &mut packed);
        let mut table = Reader::new(&table);
        let mut cols = ColumnsIn::read(2, 2, &mut table, &packed).expect("columns");
        let mut control = Reader::new(&control);
        let (mut r_table, mut r_packed) = (Vec::new(), Vec::new());
        r_cols.finish(&mut r_table, &mut r_packed);
        let mut r_table = Reader::new(&r_table);
        let mut r_cols = ColumnsIn::read(1, 1, &mut r_table, &r_packed).expect("columns");
        let mut r_control = Reader::new(&r_control);
        let (mut r_back, mut back) = (IntSlot::default(), IntSlot::default());
        for ((&r, &v), &reference) in references.iter().zip(&values).zip(&said) {
            assert_eq!(r_back.get(0, &mut r_control, &mut r_cols), Ok(r));
            let read = back.get_peak(None, reference, 1, &mut control, &mut cols);
            assert_eq!(read, Ok(v));
        }
        // Said by its own deltas, each of the 200 takes the reference's noise over 97
        // (about 15 bits at 8 B): 375 bytes and more; against the reference, a few bits.
        assert!(plain >= 300, "{plain} bytes said plainly");
        let steady: usize = packed.len();
        assert!(
            steady * 3 < plain,
            "{steady} bytes against the reference, {plain} plainly"
        );
    }

    #[test]
    fn every_value_reads_back_to_the_same_bits() {
        let ints = [
            Some(0u64),
            Some(512),
            Some(1024),
            None,
            Some(1024),
            Some(1536),
            Some(2048),
            Some(7),
            Some(u64::MAX),
            Some(3),
        ];
        let floats = [
            Some(1.767e9 + 0.123_456_7),
            Some(1.767e9 + 1.123_456_8),
            Some(1.767e9 + 2.123_457),
            Some(62.3),
            Some(0.1 + 0.2),
            None,
            Some(-0.0),
            Some(f64::NAN),
            Some(f64::INFINITY),
            Some(1e300),
            Some(5e-324),
            Some(100.0),
        ];
        let (mut i_out, mut f_out) = (IntSlot::default(), FloatSlot::default());
        let mut control = Vec::new();
        let mut cols = ColumnsOut::new(2);
        for v in ints {
            i_out.put(v, 0, &mut control, &mut cols);
        }
        for v in floats {
            f_out.put(v, 1, &mut control, &mut cols);
        }
        let mut packed = Vec::new();
        let mut table = Vec::new();
        cols.finish(&mut table, &mut packed);
        let mut table = Reader::new(&table);
        let mut cols = ColumnsIn::read(2, 2, &mut table, &packed).expect("columns");
        let mut control = Reader::new(&control);
        let (mut i_in, mut f_in) = (IntSlot::default(), FloatSlot::default());
        for v in ints {
            assert_eq!(i_in.get(0, &mut control, &mut cols), Ok(v));
        }
        for v in floats {
            let back = f_in.get(1, &mut control, &mut cols).expect("float");
            assert_eq!(back.map(f64::to_bits), v.map(f64::to_bits));
        }
    }
}
