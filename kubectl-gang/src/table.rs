//! Tables that look like kubectl's: no borders, upper-case headers, three spaces between columns,
//! colour only on a terminal and never with `NO_COLOR`; laid out by comfy-table, cells escaped
//! before they reach it.

use std::io::IsTerminal;

use comfy_table::{Cell, CellAlignment, Color, ColumnConstraint, ContentArrangement, Table, Width};

use crate::text::escape_controls;

/// True when stdout is a terminal and `NO_COLOR` is unset.
pub fn color_enabled() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal()
}

/// What a cell means, for colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    Plain,
    Good,
    Warn,
    Bad,
}

impl Tone {
    /// The tone of a gang phase or reason.
    pub fn of(word: &str) -> Tone {
        match word {
            "Running" | "Scheduled" | "Completed" | "yes" => Tone::Good,
            "Pending"
            | "Preempting"
            | "Reserved"
            | "BackingOff"
            | "WaitingForMembers"
            | "WaitingForGangGroup" => Tone::Warn,
            "Failed"
            | "Degraded"
            | "Stale"
            | "InvalidSpec"
            | "Unschedulable"
            | "TopologyUnsatisfiable"
            | "TimedOut"
            | "no" => Tone::Bad,
            _ => Tone::Plain,
        }
    }
}

/// A table under construction.
#[derive(Debug)]
pub struct Grid {
    headers: Vec<String>,
    rows: Vec<Vec<(String, Tone)>>,
}

impl Grid {
    pub fn new<S: AsRef<str>>(headers: &[S]) -> Self {
        Grid { headers: headers.iter().map(|h| h.as_ref().to_string()).collect(), rows: Vec::new() }
    }

    /// A row of plain cells.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(|c| (c.into(), Tone::Plain)).collect());
    }

    /// A row with tones.
    pub fn toned(&mut self, mut cells: Vec<(String, Tone)>) {
        // Held until the table is rendered: no spare room per row (a row pushed cell by cell
        // has room for 16).
        cells.shrink_to_fit();
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Renders with `indent` spaces before every line (comfy-table lays it out: each column as
    /// wide as its widest line, a CJK character two columns, three spaces between columns, a
    /// cell's lines on lines of their own). Data is escaped before it reaches the table, so the
    /// only control sequences in the text are the colours the table adds.
    ///
    /// A table of many rows is laid out [`ROWS_PER_TABLE`] rows at a time, every part with the
    /// column widths of the whole: the same text, without comfy-table holding every cell of a
    /// cluster's worth of rows at once (some 25 times the text it prints).
    pub fn render(&self, no_headers: bool, color: bool, indent: usize) -> String {
        self.render_in(no_headers, color, indent, ROWS_PER_TABLE)
    }

    fn render_in(&self, no_headers: bool, color: bool, indent: usize, per_table: usize) -> String {
        let mut out = String::new();
        if self.rows.is_empty() && no_headers {
            return out;
        }
        let parts: Vec<&[Vec<(String, Tone)>]> =
            if self.rows.is_empty() { vec![&[]] } else { self.rows.chunks(per_table.max(1)).collect() };
        // The widths of the whole, from each part measured alone (its table dropped at once).
        let widths = (parts.len() > 1).then(|| {
            let mut widths: Vec<u16> = Vec::new();
            for rows in &parts {
                let part = self.table(rows, !no_headers, false, None).column_max_content_widths();
                widths.resize(widths.len().max(part.len()), 0);
                for (w, p) in widths.iter_mut().zip(part) {
                    *w = (*w).max(p);
                }
            }
            widths
        });
        let pad = " ".repeat(indent);
        for (i, rows) in parts.iter().enumerate() {
            let t = self.table(rows, !no_headers && i == 0, color, widths.as_deref());
            for line in t.lines() {
                out.push_str(&pad);
                out.push_str(line.trim_end());
                out.push('\n');
            }
        }
        out
    }

    /// `rows` as one comfy-table, with the header if `header`, and every column as wide as
    /// `widths` says when given (its content's width, padding not included).
    fn table(
        &self,
        rows: &[Vec<(String, Tone)>],
        header: bool,
        color: bool,
        widths: Option<&[u16]>,
    ) -> Table {
        let mut t = Table::new();
        t.load_style(comfy_table::presets::NOTHING).set_content_arrangement(ContentArrangement::Disabled);
        if color {
            t.enforce_styling();
        } else {
            t.force_no_tty();
        }
        if header {
            t.set_header(
                self.headers.iter().map(|h| Cell::new(escape_controls(h)).set_alignment(CellAlignment::Left)),
            );
        }
        for r in rows {
            t.add_row(r.iter().map(|(text, tone)| {
                let c = Cell::new(escape_controls(text));
                match (color, tone) {
                    (true, Tone::Good) => c.fg(Color::Green),
                    (true, Tone::Warn) => c.fg(Color::Yellow),
                    (true, Tone::Bad) => c.fg(Color::Red),
                    _ => c,
                }
            }));
        }
        let last = t.column_count().saturating_sub(1);
        for (i, col) in t.column_iter_mut().enumerate() {
            let right = if i == last { 0 } else { 3 };
            col.set_padding((0, right));
            if let Some(&w) = widths.and_then(|w| w.get(i)) {
                col.set_constraint(ColumnConstraint::Absolute(Width::Fixed(w.saturating_add(right))));
            }
        }
        t
    }
}

/// Rows laid out by one comfy-table at a time (see [`Grid::render`]).
const ROWS_PER_TABLE: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_layout() {
        let mut g = Grid::new(&["NAME", "PHASE"]);
        g.row(["bert", "Running"]);
        g.row(["llama-pretrain", "Pending"]);
        assert_eq!(
            g.render(false, false, 0),
            "NAME             PHASE\nbert             Running\nllama-pretrain   Pending\n"
        );
        assert_eq!(g.render(true, false, 2), "  bert             Running\n  llama-pretrain   Pending\n");
    }

    #[test]
    fn colour_only_when_asked() {
        let mut g = Grid::new(&["PHASE"]);
        g.toned(vec![("Failed".into(), Tone::Bad)]);
        assert!(!g.render(false, false, 0).contains('\u{1b}'));
        assert!(g.render(false, true, 0).contains('\u{1b}'));
    }

    /// Colour around a cell's text and its padding (the codes `COLOURS` lets through); multi-line
    /// cells on lines of their own; wide characters two columns.
    #[test]
    fn colours_multi_line_cells_and_wide_characters() {
        let mut g = Grid::new(&["A", "B", "C"]);
        g.toned(vec![("x".into(), Tone::Good), ("y".into(), Tone::Warn), ("z".into(), Tone::Bad)]);
        assert_eq!(
            g.render(false, true, 0),
            "A   B   C\n\u{1b}[38;5;10mx   \u{1b}[39m\u{1b}[38;5;11my   \u{1b}[39m\u{1b}[38;5;9mz\u{1b}[39m\n"
        );
        let mut g = Grid::new(&["NAME", "MESSAGE"]);
        g.row(["日本", "one\ntwo"]);
        g.row(["abcde", "x"]);
        assert_eq!(g.render(false, false, 1), " NAME    MESSAGE\n 日本    one\n         two\n abcde   x\n");
    }

    /// A table laid out in parts is the text of the table laid out whole: headers or not, colour
    /// or not, wide characters, multi-line and empty cells, a column wider in a later part.
    #[test]
    fn a_table_laid_out_in_parts_is_the_same_text() {
        let mut g = Grid::new(&["NAME", "PHASE", "MESSAGE"]);
        for i in 0..23 {
            let name = match i % 5 {
                0 => "日本語".to_string(),
                1 => format!("worker-{}", "x".repeat(i)),
                2 => String::new(),
                3 => "a\nlonger second line".to_string(),
                _ => format!("w{i}"),
            };
            let phase = if i % 2 == 0 { "Running" } else { "Pending" };
            g.toned(vec![
                (name, Tone::Plain),
                (phase.into(), Tone::of(phase)),
                ("m".repeat(i % 7), Tone::Plain),
            ]);
        }
        for (no_headers, color, indent) in [(false, false, 0), (true, false, 2), (false, true, 1)] {
            let whole = g.render_in(no_headers, color, indent, usize::MAX);
            for per_table in [1, 2, 7, 22] {
                assert_eq!(
                    g.render_in(no_headers, color, indent, per_table),
                    whole,
                    "{per_table} rows a part"
                );
            }
        }
        assert!(g.render(false, false, 0).contains("worker-xxxxxxxxxxxxxxxxxxxxx"));
    }

    /// A cell's control characters are shown escaped, colour or not, and only the table's own
    /// colour codes are raw.
    #[test]
    fn cells_are_escaped_before_they_are_coloured() {
        let mut g = Grid::new(&["NAME", "PHASE"]);
        g.toned(vec![("hid\u{1b}[8mden".into(), Tone::Plain), ("Failed\u{1b}[38;5;10m".into(), Tone::Bad)]);
        let text = g.render(true, true, 0);
        assert_eq!(text, "hid\\x1b[8mden   \u{1b}[38;5;9mFailed\\x1b[38;5;10m\u{1b}[39m\n");
    }
}
