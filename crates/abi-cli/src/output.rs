//! Human output: aligned tables, statuses in colour on a terminal only.

use std::io::IsTerminal as _;

/// How to paint text.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    color: bool,
}

impl Style {
    /// Colour when stdout is a terminal, `NO_COLOR` is unset and the output
    /// is not JSON.
    pub fn detect(json: bool) -> Self {
        let color =
            !json && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        Self { color }
    }

    /// No colour at all.
    #[cfg(test)]
    pub fn plain() -> Self {
        Self { color: false }
    }

    /// The ANSI colour of a status word, if it has one.
    fn code(status: &str) -> Option<&'static str> {
        use abi_wire::status::{DEGRADED, DRAINING, READY, STAGED, STARTING, edge::MISSING};
        Some(match status {
            READY => "32",
            DEGRADED => "33",
            STAGED => "36",
            STARTING => "34",
            DRAINING => "35",
            "gone" | "expired" | MISSING | "cycle" => "31",
            _ => return None,
        })
    }

    /// `text` painted like the status word `status`.
    pub fn paint(&self, status: &str, text: &str) -> String {
        match (self.color, Self::code(status)) {
            (true, Some(code)) => format!("\x1b[{code}m{text}\x1b[0m"),
            _ => text.to_owned(),
        }
    }
}

/// A table of text cells; a cell may be painted as a status.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<(String, Option<String>)>>,
}

impl Table {
    /// A table with these column names.
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row of plain cells.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows
            .push(cells.into_iter().map(|c| (c, None)).collect());
    }

    /// Adds a row whose cell `status_col` is painted as its own status word.
    pub fn status_row(&mut self, cells: Vec<String>, status_col: usize) {
        let row = cells
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let paint =
                    (i == status_col).then(|| c.split_whitespace().last().unwrap_or("").to_owned());
                (c, paint)
            })
            .collect();
        self.rows.push(row);
    }

    /// The table as text, columns aligned, two spaces apart.
    pub fn render(&self, style: Style) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, (cell, _)) in row.iter().enumerate() {
                if i < widths.len() {
                    widths[i] = widths[i].max(cell.chars().count());
                }
            }
        }
        let mut out = String::new();
        let line = |cells: Vec<(String, Option<String>)>, out: &mut String| {
            let last = cells.len().saturating_sub(1);
            for (i, (cell, paint)) in cells.into_iter().enumerate() {
                let pad = widths
                    .get(i)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(cell.chars().count());
                let text = match paint {
                    Some(status) => style.paint(&status, &cell),
                    None => cell,
                };
                out.push_str(&text);
                if i != last {
                    out.push_str(&" ".repeat(pad + 2));
                }
            }
            out.push('\n');
        };
        line(
            self.header.iter().map(|h| (h.clone(), None)).collect(),
            &mut out,
        );
        for row in &self.rows {
            line(row.clone(), &mut out);
        }
        out
    }
}

/// `-` for an empty value.
pub fn or_dash(value: &str) -> String {
    if value.is_empty() {
        "-".to_owned()
    } else {
        value.to_owned()
    }
}

/// Seconds until `expires_at` (epoch seconds), as `12.3s` or `expired`.
pub fn expires_in(expires_at: f64, now: f64) -> String {
    let left = expires_at - now;
    if left <= 0.0 {
        "expired".to_owned()
    } else {
        format!("{left:.1}s")
    }
}

/// `HH:MM:SS` (UTC) of an epoch time.
pub fn clock(epoch: f64) -> String {
    let secs = epoch.max(0.0) as u64 % 86_400;
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

/// Prints a JSON value, pretty, on stdout.
pub fn print_json(value: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".into())
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_plain_style_has_no_escapes() {
        let mut table = Table::new(&["MODULE", "STATUS"]);
        table.status_row(vec!["a-long-module".into(), "READY".into()], 1);
        table.row(vec!["b".into(), "-".into()]);
        let text = table.render(Style::plain());
        assert_eq!(
            text,
            "MODULE         STATUS\na-long-module  READY\nb              -\n"
        );
        assert_eq!(expires_in(10.0, 20.0), "expired");
        assert_eq!(expires_in(21.25, 20.0), "1.2s");
    }
}
