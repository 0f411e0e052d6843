//! How the main screen shares its rows among the GPU section, the process table and the
//! findings. It is chosen from the terminal's size and the node's shape only (its GPUs and
//! MIG instances, the table's rows), never from the number of findings or the figures, so
//! the screen holds still while findings come and go.
//!
//! The rules, in order:
//! 1. The process table gets the rows it needs (its rule, its header, a row per line of the
//!    table), and the findings their least ([`findings_least`]): the GPU section takes the
//!    richest form that leaves them that. The findings take every row left over, where a
//!    finding cut at the edge goes on over more lines.
//! 2. Where no form leaves the table all it needs, the GPU section takes its leanest form
//!    (one line per GPU and MIG instance), the findings their least, and the table the rest;
//!    it scrolls with the selection.
//! 3. Where even that leaves the table less than its least, the layers' key line goes, then
//!    the findings shrink to one line, then the GPU section is cut.

/// The process table's least: its rule, its header and one row.
pub(crate) const TABLE_LEAST: u16 = 3;

/// The findings panel's least, and so its cap where the table needs the rest: its rule and a
/// line per finding, more on a taller screen (2 lines at 80x24, 3 at 120x40, 5 from 50 rows).
pub(crate) fn findings_least(body: u16) -> u16 {
    1 + (body / 10).clamp(2, 5)
}

/// The rows of each block of the main screen's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rows {
    /// Which of the GPU section's forms (an index into those given).
    pub(crate) form: usize,
    pub(crate) gpus: u16,
    pub(crate) table: u16,
    pub(crate) findings: u16,
}

/// Shares `body` rows. `forms`: the GPU section's forms, richest first, as their height and
/// whether each is a last resort; `table_need`: the rows the process table would fill.
pub(crate) fn arrange(body: u16, forms: &[(u16, bool)], table_need: u16) -> Rows {
    let table_need = table_need.max(TABLE_LEAST);
    let findings = findings_least(body);
    if let Some((form, &(gpus, _))) = forms
        .iter()
        .enumerate()
        .find(|(_, &(height, last))| !last && height + table_need + findings <= body)
    {
        return Rows {
            form,
            gpus,
            table: table_need,
            findings: body - gpus - table_need,
        };
    }
    // The table is cut whatever the form: the leanest that leaves it its least.
    let leanest = forms.iter().rposition(|&(_, last)| !last);
    let form = match leanest {
        Some(i) if forms[i].0 + TABLE_LEAST + findings <= body => i,
        _ => forms.len().saturating_sub(1),
    };
    let height = forms.get(form).map_or(0, |f| f.0);
    let findings = findings
        .min(body.saturating_sub(height + TABLE_LEAST))
        .max(2)
        .min(body);
    let gpus = height.min(body.saturating_sub(findings + TABLE_LEAST));
    Rows {
        form,
        gpus,
        table: body.saturating_sub(gpus + findings),
        findings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo's node at 120x40: panels (30 rows), compact with legends (14), without (8),
    /// and the last resort without the key line (7).
    const DEMO_120: [(u16, bool); 4] = [(30, false), (14, false), (8, false), (7, true)];

    #[test]
    fn the_table_gets_its_rows_and_the_findings_the_rest() {
        let rows = arrange(38, &DEMO_120, 11);
        assert_eq!(
            rows,
            Rows {
                form: 1,
                gpus: 14,
                table: 11,
                findings: 13
            }
        );
    }

    #[test]
    fn a_long_table_takes_all_but_the_leanest_gpus_and_the_findings_least() {
        let rows = arrange(38, &DEMO_120, 32);
        assert_eq!(rows.form, 2);
        assert_eq!(rows.findings, findings_least(38));
        assert_eq!(rows.gpus + rows.table + rows.findings, 38);
    }

    #[test]
    fn the_key_line_goes_before_the_table_falls_under_its_least() {
        // 8 GPUs at 60x16: 8 rows with the key would leave the table 2.
        let rows = arrange(14, &[(9, false), (8, true)], 11);
        assert_eq!(
            (rows.form, rows.gpus, rows.table, rows.findings),
            (1, 8, 3, 3)
        );
        // A node of many MIG rows: the section is cut, the table and findings keep theirs.
        let rows = arrange(14, &[(31, false), (30, true)], 11);
        assert_eq!((rows.gpus, rows.table, rows.findings), (9, 3, 2));
    }

    #[test]
    fn every_row_is_given_and_none_twice() {
        for body in 14..80 {
            for need in 0..60 {
                let rows = arrange(body, &DEMO_120, need);
                assert_eq!(
                    rows.gpus + rows.table + rows.findings,
                    body,
                    "{body} {need}"
                );
                assert!(rows.table >= TABLE_LEAST, "{body} {need}: {rows:?}");
                assert!(rows.findings >= 2, "{body} {need}: {rows:?}");
            }
        }
    }
}
