//! Tables that look like kubectl's: no borders, upper-case headers, three spaces between columns,
//! colour only on a terminal and never with `NO_COLOR`; cells escaped before they are coloured.

use std::io::IsTerminal;

use unicode_width::UnicodeWidthStr;

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

    /// Renders with `indent` spaces before every line: each column as wide as its widest line
    /// (terminal columns: a CJK character takes two), three spaces between columns, a cell's lines
    /// (`\n`) on lines of their own, trailing blanks trimmed. Written straight into one `String`:
    /// a table of many rows costs its text, no more.
    pub fn render(&self, no_headers: bool, color: bool, indent: usize) -> String {
        let mut out = String::new();
        if self.rows.is_empty() && no_headers {
            return out;
        }
        let columns = self.rows.iter().map(Vec::len).chain([self.headers.len()]).max().unwrap_or(0);
        let mut widths = vec![0usize; columns];
        let mut measure = |cells: &mut dyn Iterator<Item = &str>| {
            for (i, text) in cells.enumerate() {
                let widest = escape_controls(text).split('\n').map(UnicodeWidthStr::width).max().unwrap_or(0);
                widths[i] = widths[i].max(widest);
            }
        };
        if !no_headers {
            measure(&mut self.headers.iter().map(String::as_str));
        }
        for r in &self.rows {
            measure(&mut r.iter().map(|(t, _)| t.as_str()));
        }
        let pad = " ".repeat(indent);
        let line = |out: &mut String, cells: &[(&str, Tone)]| {
            let height = cells.iter().map(|(t, _)| t.split('\n').count()).max().unwrap_or(1).max(1);
            for l in 0..height {
                let start = out.len();
                out.push_str(&pad);
                for (i, width) in widths.iter().enumerate() {
                    let (text, tone) = cells.get(i).copied().unwrap_or(("", Tone::Plain));
                    let part = text.split('\n').nth(l).unwrap_or("");
                    let gap = if i + 1 == columns { 0 } else { 3 };
                    let fill = width.saturating_sub(part.width()) + gap;
                    // A tone colours the cell's text and its padding, as comfy-table did.
                    let colour = match (color, tone) {
                        (true, Tone::Good) => Some(crate::COLOURS[0]),
                        (true, Tone::Warn) => Some(crate::COLOURS[1]),
                        (true, Tone::Bad) => Some(crate::COLOURS[2]),
                        _ => None,
                    };
                    out.push_str(colour.unwrap_or(""));
                    out.push_str(part);
                    out.extend(std::iter::repeat_n(' ', fill));
                    if colour.is_some() {
                        out.push_str(crate::COLOURS[3]);
                    }
                }
                let end = out[start..].trim_end().len();
                out.truncate(start + end);
                out.push('\n');
            }
        };
        if !no_headers {
            let headers: Vec<(&str, Tone)> = self.headers.iter().map(|h| (h.as_str(), Tone::Plain)).collect();
            line(&mut out, &headers);
        }
        for r in &self.rows {
            // Data is escaped before it is coloured: only the colour added here is obeyed.
            let escaped: Vec<(std::borrow::Cow<'_, str>, Tone)> =
                r.iter().map(|(t, tone)| (escape_controls(t), *tone)).collect();
            let cells: Vec<(&str, Tone)> = escaped.iter().map(|(t, tone)| (t.as_ref(), *tone)).collect();
            line(&mut out, &cells);
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

    /// Colour around a cell's text and its padding, byte for byte as comfy-table wrote it (which
    /// this renderer replaced); multi-line cells on lines of their own; wide characters two columns.
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
