//! Text for a terminal: control characters escaped (the plugin's own colours excepted), errors as
//! one line, kubectl's ages. The bottom of the plugin: every command and the tables use it.

use scheduler_core::Time;

use crate::cli::{Cli, Command, Format};

/// The colour codes this plugin writes itself (for [`crate::table::Tone`]: the 256-colour codes comfy-table writes for them): green,
/// yellow, red, and back to the default colour. Only these, and only when colour is on, are
/// written as they are; every other control sequence is shown escaped.
pub const COLOURS: [&str; 4] = ["\x1b[38;5;10m", "\x1b[38;5;11m", "\x1b[38;5;9m", "\x1b[39m"];

/// Whether this command line may colour its output (on a terminal, without `NO_COLOR`): only
/// tables do (`status`, `simulate`, `demo` as tables), and they escape the data they show before
/// adding colour. Any other output (JSON, YAML, names, `validate`, errors) has no colour of its own,
/// so every control sequence in it is escaped.
pub fn may_colour(cli: &Cli) -> bool {
    let tables = matches!(cli.global.output, None | Some(Format::Table | Format::Wide));
    tables && matches!(cli.command, Command::Status(_) | Command::Simulate(_) | Command::Demo)
}

/// Text safe for a terminal: every control character that names, messages or files could carry
/// (escape sequences that colour, hide or move text, retitle the window; carriage returns; bells;
/// C1 codes) is written out as `\x1b`, `\r`, `\x9b`. Newlines and tabs stay.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = Vec::with_capacity(text.len() + 16);
    // Writing into a `Vec` cannot fail.
    let _ = write_escaped(&mut out, text, false);
    std::borrow::Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

fn needs_escape(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// Writes `text` to `w` with control characters escaped as [`escape_controls`] does, keeping the
/// plugin's own [`COLOURS`] when `colours`; clean stretches are written as they are, never copied.
pub fn write_escaped(w: &mut impl std::io::Write, text: &str, colours: bool) -> std::io::Result<()> {
    let mut rest = text;
    while let Some(at) = rest.find(needs_escape) {
        w.write_all(&rest.as_bytes()[..at])?;
        rest = &rest[at..];
        if colours && let Some(code) = COLOURS.iter().find(|c| rest.starts_with(**c)) {
            w.write_all(code.as_bytes())?;
            rest = &rest[code.len()..];
            continue;
        }
        let Some(c) = rest.chars().next() else { break };
        match c {
            '\r' => w.write_all(b"\\r")?,
            c if (c as u32) < 0x100 => write!(w, "\\x{:02x}", c as u32)?,
            c => write!(w, "\\u{{{:x}}}", c as u32)?,
        }
        rest = &rest[c.len_utf8()..];
    }
    w.write_all(rest.as_bytes())
}

/// An error as one line of text: each cause in the chain once (a library's message often repeats
/// its source's, as `io` and `kube` errors do), control characters escaped.
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if part.is_empty() || text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    escape_controls(&text).into_owned()
}

/// kubectl's short ages: `45s`, `3m12s`, `17m`, `5h3m`, `20h`, `3d4h`, `12d`, `2y40d`.
pub fn age(now: Time, then: Time) -> String {
    if then.0 <= 0 {
        return "<unknown>".into();
    }
    let s = now.since(then).as_secs();
    let (m, h, d) = (s / 60, s / 3600, s / 86_400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s.is_multiple_of(60) { format!("{m}m") } else { format!("{m}m{}s", s % 60) }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        if m.is_multiple_of(60) { format!("{h}h") } else { format!("{h}h{}m", m % 60) }
    } else if h < 48 {
        format!("{h}h")
    } else if d < 8 {
        if h.is_multiple_of(24) { format!("{d}d") } else { format!("{d}d{}h", h % 24) }
    } else if d < 365 * 2 {
        format!("{d}d")
    } else {
        format!("{}y{}d", d / 365, d % 365)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_colours_included() {
        assert_eq!(escape_controls("plain\tline\n"), "plain\tline\n");
        assert_eq!(escape_controls("evil\x1b]0;pwned\x07name"), "evil\\x1b]0;pwned\\x07name");
        assert_eq!(escape_controls("a\x1b[2Jb\rc"), "a\\x1b[2Jb\\rc");
        // A colour in data is data: hidden text (8) and colours alike are shown, not obeyed.
        assert_eq!(escape_controls("hid\x1b[8mden"), "hid\\x1b[8mden");
        assert_eq!(escape_controls("\x1b[38;5;9mred\x1b[39m"), "\\x1b[38;5;9mred\\x1b[39m");
        assert_eq!(escape_controls("c1\u{9b}31m"), "c1\\x9b31m");
        assert_eq!(escape_controls("del\u{7f}"), "del\\x7f");
    }

    #[test]
    fn only_the_plugins_own_colours_pass_and_only_when_colour_is_on() {
        let text = "\x1b[38;5;9mbad\x1b[39m \x1b[8mhidden\x1b[0m \x1b[31mred";
        let write = |colours| {
            let mut out = Vec::new();
            write_escaped(&mut out, text, colours).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(write(true), "\x1b[38;5;9mbad\x1b[39m \\x1b[8mhidden\\x1b[0m \\x1b[31mred");
        assert_eq!(write(false), escape_controls(text));
    }

    #[test]
    fn an_error_chain_says_each_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file (os error 2)");
        let e =
            anyhow::Error::new(io).context("reading x.yaml: No such file (os error 2)").context("simulate");
        assert_eq!(error_text(&e), "simulate: reading x.yaml: No such file (os error 2)");
        let e = anyhow::anyhow!("bad \x1b[31mname");
        assert_eq!(error_text(&e), "bad \\x1b[31mname");
    }

    #[test]
    fn ages_read_like_kubectl() {
        let now = Time::from_secs(10_000_000);
        let ago = |s: i64| age(now, Time::from_secs(10_000_000 - s));
        assert_eq!(ago(45), "45s");
        assert_eq!(ago(192), "3m12s");
        assert_eq!(ago(17 * 60 + 5), "17m");
        assert_eq!(ago(5 * 3600 + 180), "5h3m");
        assert_eq!(ago(20 * 3600), "20h");
        assert_eq!(ago(3 * 86_400 + 4 * 3600), "3d4h");
        assert_eq!(ago(12 * 86_400), "12d");
        assert_eq!(age(now, Time(0)), "<unknown>");
    }
}
