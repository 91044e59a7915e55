//! Tables that look like kubectl's: no borders, upper-case headers, three spaces between columns,
//! colour only on a terminal and never with `NO_COLOR`.

use std::io::IsTerminal;

use comfy_table::{Cell, CellAlignment, Color, ContentArrangement, Table};

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

    /// Renders with `indent` spaces before every line.
    pub fn render(&self, no_headers: bool, color: bool, indent: usize) -> String {
        let mut t = Table::new();
        t.load_style(comfy_table::presets::NOTHING).set_content_arrangement(ContentArrangement::Disabled);
        if color {
            t.enforce_styling();
        } else {
            t.force_no_tty();
        }
        if !no_headers {
            t.set_header(self.headers.iter().map(|h| Cell::new(h).set_alignment(CellAlignment::Left)));
        }
        for r in &self.rows {
            t.add_row(r.iter().map(|(text, tone)| {
                let c = Cell::new(text);
                match (color, tone) {
                    (true, Tone::Good) => c.fg(Color::Green),
                    (true, Tone::Warn) => c.fg(Color::Yellow),
                    (true, Tone::Bad) => c.fg(Color::Red),
                    _ => c,
                }
            }));
        }
        let last = self.headers.len().saturating_sub(1);
        for (i, col) in t.column_iter_mut().enumerate() {
            col.set_padding((0, if i == last { 0 } else { 3 }));
        }
        let pad = " ".repeat(indent);
        let mut out = String::new();
        if self.rows.is_empty() && no_headers {
            return out;
        }
        for line in t.to_string().lines() {
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
}
