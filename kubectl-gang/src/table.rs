//! Tables that look like kubectl's: no borders, upper-case headers, three spaces between columns,
//! colour only on a terminal and never with `NO_COLOR`; laid out by comfy-table, cells escaped
//! before they reach it.

use std::io::IsTerminal;

use comfy_table::{Cell, CellAlignment, Color, ContentArrangement, Table};

use crate::escape_controls;

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
    pub fn toned(&mut self, cells: Vec<(String, Tone)>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Renders with `indent` spaces before every line (comfy-table lays it out: each column as
    /// wide as its widest line, a CJK character two columns, three spaces between columns, a
    /// cell's lines on lines of their own). Data is escaped before it reaches the table, so the
    /// only control sequences in the text are the colours the table adds.
    pub fn render(&self, no_headers: bool, color: bool, indent: usize) -> String {
        let mut out = String::new();
        if self.rows.is_empty() && no_headers {
            return out;
        }
        let mut t = Table::new();
        t.load_style(comfy_table::presets::NOTHING).set_content_arrangement(ContentArrangement::Disabled);
        if color {
            t.enforce_styling();
        } else {
            t.force_no_tty();
        }
        if !no_headers {
            t.set_header(
                self.headers.iter().map(|h| Cell::new(escape_controls(h)).set_alignment(CellAlignment::Left)),
            );
        }
        for r in &self.rows {
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
            col.set_padding((0, if i == last { 0 } else { 3 }));
        }
        let pad = " ".repeat(indent);
        for line in t.lines() {
            out.push_str(&pad);
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

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
