//! A device's history as chart columns: at each column's instant, the bands of its layers
//! from the bottom (live tensors) to the top (free), and how many rows each gets.

use super::super::chart::TimeAxis;
use crate::history::{History, Metric, SeriesKey};
use crate::layers::Layer;

/// What fills one cell of a chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Band {
    Layer(Layer),
    /// Occupied bytes no known layer holds at that instant: partly known.
    Partial,
}

/// The bands of a device at one instant, bottom to top, in bytes: its known layers, then
/// what is only partly known, then free. `None` where nothing is known.
pub(crate) type Column = Option<Vec<(Band, u64)>>;

/// The device's columns from its history: `axis.width` of them, each the last sample in
/// its span. Where the history's points are sparser than the columns, a point spreads over
/// the columns it covers.
pub(crate) fn columns(history: &History, uuid: &str, total: u64, axis: &TimeAxis) -> Vec<Column> {
    let width = axis.width;
    let Some(used) = history.get(&SeriesKey::device(uuid, Metric::Used)) else {
        return vec![None; width];
    };
    let resolution = used.resolution(axis.window).max(f64::MIN_POSITIVE);
    // No chunk narrower than a point of the tier read, so none falls between two points.
    let chunks = ((axis.window / (resolution * 1.0001)).floor() as usize).clamp(1, width.max(1));
    let read = |metric| {
        history
            .get(&SeriesKey::device(uuid, metric))
            .map(|s| s.chunks(axis.end, axis.window, chunks))
            .unwrap_or_else(|| vec![None; chunks])
    };
    let occupied = used.chunks(axis.end, axis.window, chunks);
    let layers: Vec<(Layer, Vec<Option<crate::history::Span>>)> = Layer::ALL
        .into_iter()
        .filter(|&l| l != Layer::Free)
        .map(|l| (l, read(Metric::Layer(l))))
        .collect();
    let per_chunk: Vec<Column> = (0..chunks)
        .map(|i| {
            let occupied = occupied[i]?.last;
            let known: u64 = layers
                .iter()
                .filter_map(|(_, values)| values[i].map(|s| s.last))
                .fold(0, u64::saturating_add);
            let partial = occupied.saturating_sub(known);
            // What is only partly known goes where the first unknown layer would be: a
            // stale feed's pool shows as `?` in the pool's place, not on top of `other`.
            let first_unknown = layers
                .iter()
                .position(|(_, values)| values[i].is_none())
                .unwrap_or(layers.len());
            let mut bands: Vec<(Band, u64)> = Vec::with_capacity(layers.len() + 2);
            for (position, (layer, values)) in layers.iter().enumerate() {
                if position == first_unknown {
                    bands.push((Band::Partial, partial));
                }
                if let Some(span) = values[i] {
                    bands.push((Band::Layer(*layer), span.last));
                }
            }
            if first_unknown == layers.len() {
                bands.push((Band::Partial, partial));
            }
            bands.push((Band::Layer(Layer::Free), total.saturating_sub(occupied)));
            Some(bands)
        })
        .collect();
    (0..width)
        .map(|c| per_chunk[(c * chunks / width.max(1)).min(chunks - 1)].clone())
        .collect()
}

/// The band of each of `height` rows of a column, bottom first: each band's upper edge is
/// its running total rounded to a row, so a layer that grows lifts its edge steadily.
pub(crate) fn stack(bands: &[(Band, u64)], total: u64, height: usize) -> Vec<Band> {
    let mut rows = Vec::with_capacity(height);
    if total == 0 {
        return rows;
    }
    let mut running: u128 = 0;
    for &(band, bytes) in bands {
        running += u128::from(bytes);
        let edge = ((running * height as u128 * 2 + u128::from(total)) / (2 * u128::from(total)))
            .min(height as u128) as usize;
        while rows.len() < edge {
            rows.push(band);
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::super::band_glyph;
    use super::*;
    use crate::history::History;
    use crate::ui::widgets::short_bytes;

    /// Short figures for a column, bottom to top: for tests and debugging.
    fn describe(column: &Column) -> String {
        match column {
            None => "unknown".into(),
            Some(bands) => bands
                .iter()
                .map(|(b, v)| format!("{}{}", band_glyph(*b), short_bytes(Some(*v))))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    #[test]
    fn a_column_stacks_to_its_total_and_a_growing_layer_lifts_its_edge() {
        let total = 80u64 << 30;
        let column = |live: u64| {
            vec![
                (Band::Layer(Layer::Live), live << 30),
                (Band::Layer(Layer::Cached), 10 << 30),
                (Band::Partial, 0),
                (Band::Layer(Layer::Free), total - ((live + 10) << 30)),
            ]
        };
        let low = stack(&column(10), total, 8);
        assert_eq!(low.len(), 8);
        assert_eq!(
            low.iter()
                .filter(|&&b| b == Band::Layer(Layer::Live))
                .count(),
            1
        );
        let high = stack(&column(40), total, 8);
        assert_eq!(
            high.iter()
                .filter(|&&b| b == Band::Layer(Layer::Live))
                .count(),
            4
        );
        assert_eq!(high[7], Band::Layer(Layer::Free));
    }

    /// A gap in the history is a blank column, never a column of zeros; bytes beyond the
    /// known layers are partial, not given to a layer.
    #[test]
    fn gaps_stay_unknown_and_unexplained_bytes_are_partial() {
        let mut history = History::default();
        let uuid = "GPU-x";
        let total = 10u64 << 30;
        for t in 0..60 {
            let time = f64::from(t);
            history.begin(time, 1.0);
            let known = !(20..30).contains(&t);
            history.record(
                SeriesKey::device(uuid, Metric::Used),
                time,
                known.then_some(6 << 30),
            );
            for layer in Layer::ALL.into_iter().filter(|&l| l != Layer::Free) {
                let value = match layer {
                    Layer::Live => Some(4u64 << 30),
                    // From 40 s the cache is only partly known: recorded as a gap.
                    Layer::Cached if t < 40 => Some(2 << 30),
                    Layer::Cached => None,
                    _ => Some(0),
                };
                history.record(
                    SeriesKey::device(uuid, Metric::Layer(layer)),
                    time,
                    value.filter(|_| known),
                );
            }
        }
        let axis = TimeAxis {
            end: 59.0,
            window: 60.0,
            width: 60,
        };
        let columns = columns(&history, uuid, total, &axis);
        assert_eq!(columns.len(), 60);
        let at = |t: f64| &columns[axis.column(t).expect("on the axis")];
        assert_eq!(*at(25.0), None, "{}", describe(at(25.0)));
        let bands = at(10.0).clone().expect("known");
        let get = |bands: &[(Band, u64)], b: Band| bands.iter().find(|x| x.0 == b).map(|x| x.1);
        assert_eq!(get(&bands, Band::Layer(Layer::Cached)), Some(2 << 30));
        assert_eq!(get(&bands, Band::Partial), Some(0));
        assert_eq!(get(&bands, Band::Layer(Layer::Free)), Some(4 << 30));
        let later = at(50.0).clone().expect("known");
        assert_eq!(get(&later, Band::Layer(Layer::Cached)), None);
        assert_eq!(get(&later, Band::Partial), Some(2 << 30));
        assert_eq!(
            later.iter().map(|b| b.1).sum::<u64>(),
            total,
            "still adds up to the total"
        );
    }
}
