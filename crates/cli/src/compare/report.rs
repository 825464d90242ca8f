//! `report.html`: one self-contained page (inline SVG and CSS, no script, nothing
//! fetched) that shows at a glance which policy wins where, by how much, and how far
//! each is from the clairvoyant bound.
//!
//! Sections, each with at least one chart: the leaderboard; slowdown per workload;
//! fast access ratio over time; migration traffic over time; page-hotness heat maps;
//! placement quality; the papers' claims as the policy pages record them; and every
//! run's numbers.

use super::{MatrixSpec, ResultRow, RunRecord, Standing};
use std::collections::BTreeMap;
use std::fmt::Write;

mod pages {
    include!(concat!(env!("OUT_DIR"), "/policy_pages.rs"));
}

/// 24 colours of distinct hue and lightness (Kelly's colours of maximum contrast
/// without white, then four more), so that every registered policy and reference of
/// one report has its own (the registry holds 19).
const PALETTE: &[&str] = &[
    "#0067a5", "#f38400", "#008856", "#be0032", "#875692", "#882d17", "#e68fac", "#848482",
    "#8db600", "#a1caf1", "#604e97", "#f6a600", "#b3446c", "#2b3d26", "#c2b280", "#e25822",
    "#654522", "#dcd300", "#f99379", "#222222", "#17becf", "#000080", "#9edae5", "#7b4173",
];

/// HTML-escape text.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A colour per series name, stable across the report's charts.
pub struct Colors(BTreeMap<String, &'static str>);

impl Colors {
    /// Colours for these names, assigned in sorted order.
    pub fn new(policies: impl Iterator<Item = String>) -> Colors {
        let mut names: Vec<String> = policies.collect();
        names.sort();
        names.dedup();
        Colors(
            names
                .into_iter()
                .enumerate()
                .map(|(i, n)| (n, PALETTE[i % PALETTE.len()]))
                .collect(),
        )
    }
    /// The colour of a name.
    pub fn of(&self, p: &str) -> &'static str {
        self.0.get(p).copied().unwrap_or("#444")
    }
}

/// Height a chart needs so that its legend (16 px per entry, from `top + 10`) fits.
fn height_for_legend(h: f64, top: f64, entries: usize) -> f64 {
    h.max(top + 20.0 + 16.0 * entries as f64)
}

/// A tick label: the value to three significant digits, trailing zeros dropped
/// (0.25 stays 0.25, 1000 stays 1000).
fn tick(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".into();
    }
    let digits = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn legend(names: &[String], colors: &Colors, x: f64, y: f64) -> String {
    let mut s = String::new();
    for (i, n) in names.iter().enumerate() {
        let yy = y + i as f64 * 16.0;
        let _ = write!(
            s,
            r#"<rect x="{x}" y="{}" width="10" height="10" fill="{}"/><text x="{}" y="{}" font-size="11">{}</text>"#,
            yy - 9.0,
            colors.of(n),
            x + 14.0,
            yy,
            esc(n)
        );
    }
    s
}

fn nice_max(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if v <= m * p {
            return m * p;
        }
    }
    10.0 * p
}

/// A grouped bar chart: one group per category, one bar per series.
pub fn bar_chart(
    title: &str,
    categories: &[String],
    series: &[(String, Vec<f64>)],
    y_label: &str,
    colors: &Colors,
) -> String {
    let (w, left, top, bottom, right) = (760.0, 60.0, 30.0, 80.0, 170.0);
    let h = height_for_legend(320.0, top, series.len());
    let plot_w = w - left - right;
    let plot_h = h - top - bottom;
    let max = nice_max(
        series
            .iter()
            .flat_map(|(_, v)| v.iter().cloned())
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max),
    );
    let mut s = format!(
        r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" aria-label="{}">"#,
        esc(title)
    );
    let _ = write!(
        s,
        r#"<text x="{left}" y="18" font-size="13" font-weight="bold">{}</text>"#,
        esc(title)
    );
    for k in 0..=4 {
        let v = max * k as f64 / 4.0;
        let y = top + plot_h - plot_h * k as f64 / 4.0;
        let _ = write!(
            s,
            r##"<line x1="{left}" y1="{y}" x2="{}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" font-size="10" text-anchor="end">{}</text>"##,
            left + plot_w,
            left - 4.0,
            y + 3.0,
            tick(v)
        );
    }
    let _ = write!(
        s,
        r#"<text x="14" y="{}" font-size="11" transform="rotate(-90 14 {})" text-anchor="middle">{}</text>"#,
        top + plot_h / 2.0,
        top + plot_h / 2.0,
        esc(y_label)
    );
    let groups = categories.len().max(1) as f64;
    let gw = plot_w / groups;
    // Bars share a group's width among the series that have a value there, so a chart
    // with one value per group (the leaderboard) gets full-width bars.
    let finite_in = |gi: usize| {
        series
            .iter()
            .filter(|(_, v)| v.get(gi).is_some_and(|x| x.is_finite()))
            .count()
    };
    let nb = (0..categories.len())
        .map(finite_in)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let bw = (gw * 0.8 / nb).max(1.0);
    let slant = categories
        .iter()
        .any(|c| c.chars().count() as f64 * 6.0 > gw);
    for (gi, cat) in categories.iter().enumerate() {
        let gx = left + gi as f64 * gw;
        let mut slot = 0.0;
        for (name, vals) in series.iter() {
            let v = vals.get(gi).copied().unwrap_or(f64::NAN);
            if !v.is_finite() {
                continue;
            }
            let si = slot;
            slot += 1.0;
            let bh = plot_h * (v / max).clamp(0.0, 1.0);
            let _ = write!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: {:.3}</title></rect>"#,
                gx + gw * 0.1 + si * bw,
                top + plot_h - bh,
                bw,
                bh,
                colors.of(name),
                esc(name),
                v
            );
        }
        // When a label would not fit its group's width, all are slanted (never
        // overlapped).
        let (x, y) = (gx + gw / 2.0, top + plot_h + 14.0);
        let placement = if slant {
            format!(r#"text-anchor="end" transform="rotate(-35 {x:.1} {y})""#)
        } else {
            r#"text-anchor="middle""#.to_string()
        };
        let _ = write!(
            s,
            r#"<text x="{x:.1}" y="{y}" font-size="10" {placement}>{}</text>"#,
            esc(cat)
        );
    }
    let names: Vec<String> = series.iter().map(|(n, _)| n.clone()).collect();
    s.push_str(&legend(&names, colors, w - right + 10.0, top + 10.0));
    s.push_str("</svg>");
    s
}

/// A line chart, one line per series of (x, y) points.
pub fn line_chart(
    title: &str,
    series: &[(String, Vec<(f64, f64)>)],
    x_label: &str,
    y_label: &str,
    y_max: Option<f64>,
    colors: &Colors,
) -> String {
    let (w, left, top, bottom, right) = (760.0, 60.0, 30.0, 45.0, 170.0);
    let h = height_for_legend(280.0, top, series.len());
    let plot_w = w - left - right;
    let plot_h = h - top - bottom;
    let x_max = nice_max(
        series
            .iter()
            .flat_map(|(_, p)| p.iter().map(|q| q.0))
            .fold(0.0, f64::max),
    );
    let y_top = y_max.unwrap_or_else(|| {
        nice_max(
            series
                .iter()
                .flat_map(|(_, p)| p.iter().map(|q| q.1))
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max),
        )
    });
    let mut s = format!(
        r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" aria-label="{}">"#,
        esc(title)
    );
    let _ = write!(
        s,
        r#"<text x="{left}" y="18" font-size="13" font-weight="bold">{}</text>"#,
        esc(title)
    );
    for k in 0..=4 {
        let y = top + plot_h - plot_h * k as f64 / 4.0;
        let x = left + plot_w * k as f64 / 4.0;
        let _ = write!(
            s,
            r##"<line x1="{left}" y1="{y}" x2="{}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" font-size="10" text-anchor="end">{}</text><text x="{x}" y="{}" font-size="10" text-anchor="middle">{}</text>"##,
            left + plot_w,
            left - 4.0,
            y + 3.0,
            tick(y_top * k as f64 / 4.0),
            top + plot_h + 14.0,
            tick(x_max * k as f64 / 4.0)
        );
    }
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" font-size="11" text-anchor="middle">{}</text><text x="14" y="{}" font-size="11" transform="rotate(-90 14 {})" text-anchor="middle">{}</text>"#,
        left + plot_w / 2.0,
        h - 8.0,
        esc(x_label),
        top + plot_h / 2.0,
        top + plot_h / 2.0,
        esc(y_label)
    );
    for (name, pts) in series {
        let mut d = String::new();
        for (i, (x, y)) in pts.iter().filter(|p| p.1.is_finite()).enumerate() {
            let px = left + plot_w * (x / x_max).clamp(0.0, 1.0);
            let py = top + plot_h - plot_h * (y / y_top).clamp(0.0, 1.0);
            let _ = write!(d, "{}{:.1},{:.1}", if i == 0 { "M" } else { " L" }, px, py);
        }
        if !d.is_empty() {
            let _ = write!(
                s,
                r#"<path d="{d}" fill="none" stroke="{}" stroke-width="1.5"><title>{}</title></path>"#,
                colors.of(name),
                esc(name)
            );
        }
    }
    let names: Vec<String> = series.iter().map(|(n, _)| n.clone()).collect();
    s.push_str(&legend(&names, colors, w - right + 10.0, top + 10.0));
    s.push_str("</svg>");
    s
}

/// A heat map: rows are epochs (time, downwards), columns address bins; colour is
/// the log of memory accesses.
pub fn heat_map(title: &str, rows: &[Vec<u64>]) -> String {
    let (w, left, top) = (760.0, 60.0, 30.0);
    let cols = rows.iter().map(|r| r.len()).max().unwrap_or(1).max(1);
    let cell_w = (w - left - 20.0) / cols as f64;
    let cell_h = (220.0 / rows.len().max(1) as f64).clamp(3.0, 24.0);
    let h = top + cell_h * rows.len() as f64 + 40.0;
    let max = rows.iter().flatten().copied().max().unwrap_or(1).max(1) as f64;
    let mut s = format!(
        r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h:.0}" role="img" aria-label="{}">"#,
        esc(title)
    );
    let _ = write!(
        s,
        r#"<text x="{left}" y="18" font-size="13" font-weight="bold">{}</text>"#,
        esc(title)
    );
    for (ri, row) in rows.iter().enumerate() {
        for (ci, &v) in row.iter().enumerate() {
            if v == 0 {
                continue;
            }
            let t = ((v as f64).ln_1p() / max.ln_1p()).clamp(0.0, 1.0);
            // white → dark red
            let r = 255.0 - 90.0 * t;
            let g = 255.0 - 235.0 * t;
            let b = 255.0 - 235.0 * t;
            let _ = write!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.2}" height="{:.2}" fill="rgb({:.0},{:.0},{:.0})"><title>epoch {}, bin {}: {}</title></rect>"#,
                left + ci as f64 * cell_w,
                top + ri as f64 * cell_h,
                cell_w + 0.3,
                cell_h + 0.3,
                r,
                g,
                b,
                ri + 1,
                ci,
                v
            );
        }
    }
    let _ = write!(
        s,
        r#"<text x="{}" y="{:.0}" font-size="11" text-anchor="middle">address (pages in mapping order) →</text><text x="14" y="{:.0}" font-size="11" transform="rotate(-90 14 {:.0})" text-anchor="middle">time (epochs) →</text>"#,
        left + (w - left) / 2.0,
        h - 12.0,
        top + 60.0,
        top + 60.0
    );
    s.push_str("</svg>");
    s
}

fn fmt(v: f64, digits: usize) -> String {
    if v.is_finite() {
        format!("{v:.digits$}")
    } else {
        "–".into()
    }
}

/// The cells of a Markdown table row: split at `|` but not at an escaped `\|`, which
/// becomes a literal bar.
fn table_cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut cells = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                chars.next();
                cells.last_mut().unwrap().push('|');
            }
            '|' => cells.push(String::new()),
            _ => cells.last_mut().unwrap().push(c),
        }
    }
    cells.iter().map(|c| c.trim().to_string()).collect()
}

/// A table cell's inline Markdown as HTML: `**strong**`, `*em*`/`_em_`,
/// `` `code` `` and `[text](url)` (kept as its text: the report links nothing out),
/// everything else escaped.
pub fn inline_markdown(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    let (mut strong, mut em) = (false, false);
    let mut prev: Option<char> = None;
    while let Some(c) = rest.chars().next() {
        if let Some(r) = rest.strip_prefix("**") {
            out.push_str(if strong { "</strong>" } else { "<strong>" });
            strong = !strong;
            rest = r;
        } else if c == '`' {
            match rest[1..].find('`') {
                Some(end) => {
                    let _ = write!(out, "<code>{}</code>", esc(&rest[1..1 + end]));
                    rest = &rest[end + 2..];
                }
                None => {
                    out.push('`');
                    rest = &rest[1..];
                }
            }
        } else if c == '[' {
            let link = rest
                .find("](")
                .and_then(|m| rest[m..].find(')').map(|e| (m, m + e)));
            match link {
                Some((m, e)) => {
                    out.push_str(&inline_markdown(&rest[1..m]));
                    rest = &rest[e + 1..];
                }
                None => {
                    out.push('[');
                    rest = &rest[1..];
                }
            }
        } else if (c == '*' || c == '_') && {
            // `_` inside a word (snake_case) is a letter, as in CommonMark.
            let next = rest[1..].chars().next();
            let word = |x: Option<char>| c == '_' && x.is_some_and(char::is_alphanumeric);
            if em {
                !word(next)
            } else {
                next.is_some_and(|n| !n.is_whitespace()) && rest[1..].contains(c) && !word(prev)
            }
        } {
            out.push_str(if em { "</em>" } else { "<em>" });
            em = !em;
            rest = &rest[1..];
        } else {
            out.push_str(&esc(&rest[..c.len_utf8()]));
            rest = &rest[c.len_utf8()..];
        }
        prev = Some(c);
    }
    if em {
        out.push_str("</em>");
    }
    if strong {
        out.push_str("</strong>");
    }
    out
}

/// A claims table from a policy page: (page, header cells, rows of cells).
type ClaimsTable = (&'static str, Vec<String>, Vec<Vec<String>>);

/// Claims tables found in the policy pages.
fn claims() -> Vec<ClaimsTable> {
    let mut out = Vec::new();
    for &(name, text) in pages::POLICY_PAGES {
        let mut in_claims = false;
        let mut header: Vec<String> = Vec::new();
        let mut rows = Vec::new();
        for line in text.lines() {
            let t = line.trim();
            if t.starts_with('#') {
                in_claims = t.to_ascii_lowercase().contains("claim");
                continue;
            }
            if !in_claims || !t.starts_with('|') {
                continue;
            }
            let cells = table_cells(t);
            if cells
                .iter()
                .all(|c| c.chars().all(|ch| ch == '-' || ch == ':' || ch == ' '))
            {
                continue;
            }
            if header.is_empty() {
                header = cells;
            } else {
                rows.push(cells);
            }
        }
        if !rows.is_empty() {
            out.push((name, header, rows));
        }
    }
    out
}

fn claim_status(row: &[String], header: &[String]) -> &'static str {
    let col = header.iter().position(|h| {
        let h = h.to_ascii_lowercase();
        h.contains("reproduc") || h.contains("status") || h.contains("verdict")
    });
    let cell = col
        .and_then(|c| row.get(c))
        .map(|c| c.to_ascii_lowercase())
        .unwrap_or_default();
    let cell = cell.trim_start_matches(['*', '_', ' ']);
    if cell.starts_with("yes") || cell.starts_with("reproduced") {
        "reproduced"
    } else if cell.starts_with("partly") || cell.starts_with("partial") {
        "partly"
    } else if cell.starts_with("no") || cell.starts_with("not") {
        "not reproduced"
    } else {
        "pending"
    }
}

/// The matrix's ratios as the report states them, with the machines that run only some.
fn ratios_text(spec: &MatrixSpec) -> String {
    let mut text = spec.ratios.join(", ");
    for (m, own) in &spec.machine_ratios {
        text.push_str(&format!("; {m} at {} only", own.join(", ")));
    }
    text
}

/// Render the whole report.
pub fn render(
    title: &str,
    spec: &MatrixSpec,
    records: &[RunRecord],
    rows: &[ResultRow],
    board: &[Standing],
    failures: &[String],
) -> String {
    let colors = Colors::new(records.iter().map(|r| r.policy.clone()));
    let mut h = String::new();
    let _ = write!(
        h,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>tierkit compare: {}</title>
<style>
body {{ font-family: sans-serif; margin: 24px; color: #222; max-width: 1100px; }}
table {{ border-collapse: collapse; font-size: 12px; margin: 8px 0 16px; }}
th, td {{ border: 1px solid #ccc; padding: 3px 6px; text-align: right; }}
th {{ background: #f3f3f3; }} td.l, th.l {{ text-align: left; }}
section {{ margin-bottom: 28px; }} .note {{ color: #555; font-size: 12px; }}
svg.chart {{ display: block; margin: 8px 0; background: #fff; }}
</style></head><body>
<h1>tierkit compare: {}</h1>
"#,
        esc(title),
        esc(title)
    );
    let scales: Vec<String> = {
        let mut v: Vec<String> = rows
            .iter()
            .map(|r| format!("{}", r.policy_time_scale))
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let rates: Vec<String> = {
        let mut v: Vec<String> = rows.iter().map(|r| r.sample_rate.clone()).collect();
        v.sort();
        v.dedup();
        v
    };
    let _ = writeln!(
        h,
        r#"<p class="note">{} runs over workloads × machines ({}) × fast:slow ratios ({}); seed {}. Slowdown is simulated runtime over <code>all-fast</code> on the same workload and machine; the bound of a cell is the faster of its two clairvoyant references, <code>oracle</code> (per-epoch placement) and <code>oracle-static</code> (one placement for the run): heuristics that read the future, not proven optima. Policy time scale: {} (1 = the papers' time constants; k &gt; 1 = every policy period and threshold divided by k to fit short runs). Sample rate: {} (1 = every 2 MiB region simulated; 1/N = one region in N, on a machine shrunk N-fold in space, counts reported for the full machine; errors in docs/sampling.md).</p>"#,
        records.len(),
        esc(&spec.machines.join(", ")),
        esc(&ratios_text(spec)),
        spec.seed.unwrap_or(crate::run_config::DEFAULT_SEED),
        esc(&scales.join(", ")),
        esc(&rates.join(", "))
    );
    if let Some(note) = super::time_scale_note(rows) {
        let _ = writeln!(h, r#"<p class="note"><b>{}</b></p>"#, esc(&note));
    }
    if let Some(note) = super::policy_set_note(spec) {
        let _ = writeln!(h, r#"<p class="note"><b>{}</b></p>"#, esc(&note));
    }

    // 1. Leaderboard
    h.push_str("<section id=\"leaderboard\"><h2>Leaderboard</h2>\n");
    let cats: Vec<String> = board.iter().map(|b| b.policy.clone()).collect();
    let series: Vec<(String, Vec<f64>)> = board
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let mut v = vec![f64::NAN; board.len()];
            v[i] = b.geomean_slowdown;
            (b.policy.clone(), v)
        })
        .collect();
    h.push_str(&bar_chart(
        "Geometric-mean slowdown against all-fast (lower is better)",
        &cats,
        &series,
        "slowdown ×",
        &colors,
    ));
    h.push_str("<table><tr><th>rank</th><th class=\"l\">policy</th><th>geomean slowdown</th><th>mean fast access ratio</th><th>mean F1</th><th>migrated MiB</th><th>tiering CPU s</th><th>cells</th></tr>\n");
    for (i, b) in board.iter().enumerate() {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"l\">{}</td><td>{}×</td><td>{}%</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            i + 1,
            esc(&b.policy),
            fmt(b.geomean_slowdown, 3),
            fmt(b.mean_fast_access_ratio * 100.0, 1),
            fmt(b.mean_f1, 2),
            fmt(b.migrated_bytes as f64 / (1u64 << 20) as f64, 1),
            fmt(b.tiering_cpu_seconds, 3),
            b.cells
        );
    }
    h.push_str("</table>\n");
    if let Some(note) = super::idle_note(board) {
        let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(&note));
    }
    if let Some(note) = super::bound_note(rows) {
        let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(&note));
    }
    if !failures.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"note\">{} run(s) failed and are missing from every table and chart:</p><ul>",
            failures.len()
        );
        for f in failures {
            let _ = writeln!(h, "<li><code>{}</code></li>", esc(f));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("</section>\n");

    // Cells in order of first appearance.
    let mut cells: Vec<(String, String, String)> = Vec::new();
    for r in records {
        let c = (r.workload.clone(), r.machine.clone(), r.ratio.clone());
        if !cells.contains(&c) {
            cells.push(c);
        }
    }
    let mut workloads: Vec<String> = Vec::new();
    for (w, _, _) in &cells {
        if !workloads.contains(w) {
            workloads.push(w.clone());
        }
    }
    let policies_in = |w: &str, m: &str, r: &str| -> Vec<&RunRecord> {
        records
            .iter()
            .filter(|x| {
                x.workload == w && x.machine == m && (x.ratio == r || x.policy == "all-fast")
            })
            .collect()
    };

    // 2. Slowdown per workload
    h.push_str("<section id=\"slowdown\"><h2>Slowdown per workload</h2>\n");
    for w in &workloads {
        let wcells: Vec<&(String, String, String)> = cells.iter().filter(|c| &c.0 == w).collect();
        let cats: Vec<String> = wcells.iter().map(|c| format!("{} {}", c.1, c.2)).collect();
        let mut names: Vec<String> = rows
            .iter()
            .filter(|r| &r.workload == w)
            .map(|r| r.policy.clone())
            .collect();
        names.sort();
        names.dedup();
        let series: Vec<(String, Vec<f64>)> = names
            .iter()
            .map(|p| {
                let v = wcells
                    .iter()
                    .map(|c| {
                        rows.iter()
                            .find(|r| {
                                r.workload == c.0
                                    && r.machine == c.1
                                    && (r.ratio == c.2 || p == "all-fast")
                                    && &r.policy == p
                            })
                            .map_or(f64::NAN, |r| r.slowdown)
                    })
                    .collect();
                (p.clone(), v)
            })
            .collect();
        h.push_str(&bar_chart(
            &format!("{w}: slowdown against all-fast"),
            &cats,
            &series,
            "slowdown ×",
            &colors,
        ));
    }
    h.push_str("</section>\n");

    // 3. Fast access ratio over time, 4. migration traffic over time
    for (id, heading, pick, ylabel, ymax) in [
        (
            "far",
            "Fast access ratio over time",
            0usize,
            "fast access ratio",
            Some(1.0),
        ),
        (
            "migration",
            "Migration traffic over time",
            1usize,
            "MiB migrated per interval",
            None,
        ),
    ] {
        let _ = writeln!(h, "<section id=\"{id}\"><h2>{heading}</h2>");
        for (w, m, r) in &cells {
            let series: Vec<(String, Vec<(f64, f64)>)> = policies_in(w, m, r)
                .iter()
                .map(|x| {
                    let pts = x
                        .series
                        .iter()
                        .map(|row| {
                            let y = if pick == 0 {
                                row.fast_access_ratio
                            } else {
                                row.migrated_bytes as f64 / (1u64 << 20) as f64
                            };
                            (row.time_s, y)
                        })
                        .collect();
                    (x.policy.clone(), pts)
                })
                .collect();
            h.push_str(&line_chart(
                &format!("{w} on {m} at {r}"),
                &series,
                "simulated time (s)",
                ylabel,
                ymax,
                &colors,
            ));
        }
        h.push_str("</section>\n");
    }

    // 5. Heat maps
    h.push_str("<section id=\"heatmap\"><h2>Page hotness (memory accesses by address and time)</h2>\n<p class=\"note\">From each workload's <code>all-fast</code> run: what the program touches, independent of placement.</p>\n");
    for w in &workloads {
        if let Some(x) = records
            .iter()
            .find(|x| &x.workload == w && x.policy == "all-fast")
            .or_else(|| records.iter().find(|x| &x.workload == w))
        {
            h.push_str(&heat_map(
                &format!("{w}: accesses per address bin per epoch"),
                &x.placement.heat,
            ));
        }
    }
    h.push_str("</section>\n");

    // 6. Placement quality
    h.push_str(
        "<section id=\"placement\"><h2>Placement quality against each epoch's hot set</h2>\n",
    );
    for (w, m, r) in &cells {
        let series: Vec<(String, Vec<(f64, f64)>)> = policies_in(w, m, r)
            .iter()
            .filter(|x| x.policy != "all-fast")
            .map(|x| {
                (
                    x.policy.clone(),
                    x.placement
                        .epochs
                        .iter()
                        .map(|e| (e.time_s, e.f1))
                        .collect(),
                )
            })
            .collect();
        h.push_str(&line_chart(
            &format!("{w} on {m} at {r}: F1 of fast-tier contents"),
            &series,
            "simulated time (s)",
            "F1",
            Some(1.0),
            &colors,
        ));
    }
    h.push_str("</section>\n");

    // 7. Claims
    h.push_str(
        "<section id=\"claims\"><h2>The papers' claims, as the policy pages record them</h2>\n",
    );
    let claims = claims();
    let statuses = ["reproduced", "partly", "not reproduced", "pending"];
    let cats: Vec<String> = claims.iter().map(|(n, _, _)| n.to_string()).collect();
    let series: Vec<(String, Vec<f64>)> = statuses
        .iter()
        .map(|st| {
            (
                st.to_string(),
                claims
                    .iter()
                    .map(|(_, hd, rows)| {
                        rows.iter().filter(|r| claim_status(r, hd) == *st).count() as f64
                    })
                    .collect(),
            )
        })
        .collect();
    let status_colors = Colors(
        statuses
            .iter()
            .zip(["#2ca02c", "#bcbd22", "#d62728", "#7f7f7f"])
            .map(|(s, c)| (s.to_string(), c))
            .collect(),
    );
    h.push_str(&bar_chart(
        "Claims per policy page by status",
        &cats,
        &series,
        "claims",
        &status_colors,
    ));
    if claims.is_empty() {
        h.push_str("<p class=\"note\">No policy page records a claims table yet.</p>\n");
    }
    for (name, header, rows) in &claims {
        let _ = writeln!(
            h,
            "<h3>{}</h3><table><tr>{}</tr>",
            esc(name),
            header
                .iter()
                .map(|c| format!("<th class=\"l\">{}</th>", inline_markdown(c)))
                .collect::<String>()
        );
        for r in rows {
            let _ = writeln!(
                h,
                "<tr>{}</tr>",
                r.iter()
                    .map(|c| format!("<td class=\"l\">{}</td>", inline_markdown(c)))
                    .collect::<String>()
            );
        }
        h.push_str("</table>\n");
    }
    h.push_str("</section>\n");

    // 8. All runs
    h.push_str("<section id=\"runs\"><h2>Every run</h2>\n");
    let cats: Vec<String> = rows
        .iter()
        .map(|r| format!("{} {}", r.workload, r.policy))
        .collect();
    let series = vec![(
        "fast access ratio".to_string(),
        rows.iter()
            .map(|r| r.fast_access_ratio)
            .collect::<Vec<f64>>(),
    )];
    let one = Colors(
        [("fast access ratio".to_string(), "#1f77b4")]
            .into_iter()
            .collect(),
    );
    if rows.len() <= 60 {
        h.push_str(&bar_chart(
            "Fast access ratio of every run",
            &cats,
            &series,
            "ratio",
            &one,
        ));
    } else {
        h.push_str(&bar_chart(
            "Fast access ratio of the first 60 runs",
            &cats[..60],
            &[(series[0].0.clone(), series[0].1[..60].to_vec())],
            "ratio",
            &one,
        ));
    }
    h.push_str("<table><tr><th class=\"l\">workload</th><th class=\"l\">machine</th><th class=\"l\">ratio</th><th class=\"l\">policy</th><th>sim s</th><th>slowdown</th><th>fast acc.</th><th>gap to bound</th><th>F1</th><th>promoted</th><th>demoted</th><th>migr. share</th><th>ping-pong</th><th>tier CPU s</th><th>metadata KiB</th><th>fast saving</th></tr>\n");
    for r in rows {
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}{}</td><td>{}</td><td>{}</td><td>{}%</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}%</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.workload),
            esc(&r.machine),
            esc(&r.ratio),
            esc(&r.policy),
            if r.reference { " (ref)" } else { "" },
            fmt(r.sim_seconds, 3),
            fmt(r.slowdown, 3),
            fmt(r.fast_access_ratio * 100.0, 1),
            fmt(r.bound_far_gap, 3),
            fmt(r.f1, 2),
            r.promoted_pages,
            r.demoted_pages,
            fmt(r.migration_traffic_share * 100.0, 2),
            r.pingpong_pages,
            fmt(r.tiering_cpu_seconds, 3),
            r.policy_metadata_bytes / 1024,
            fmt(r.fast_saving_vs_first_touch, 3)
        );
    }
    h.push_str("</table></section>\n</body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_keep_their_digits() {
        let labels: Vec<String> = [0.0, 0.25, 0.5, 0.75, 1.0, 2.5, 1250.0, 0.0125]
            .into_iter()
            .map(tick)
            .collect();
        assert_eq!(
            labels,
            ["0", "0.25", "0.5", "0.75", "1", "2.5", "1250", "0.0125"]
        );
    }

    #[test]
    fn claims_cells_keep_escaped_bars_and_render_inline_markdown() {
        assert_eq!(
            table_cells(r"| a \| b | **partly** |"),
            ["a | b", "**partly**"]
        );
        assert_eq!(
            inline_markdown("**partly**: `scan_size_mb` <2, _see_ [docs](x.md); snake_case"),
            "<strong>partly</strong>: <code>scan_size_mb</code> &lt;2, <em>see</em> docs; snake_case"
        );
        assert_eq!(inline_markdown("2 * 3 = 6"), "2 * 3 = 6");
    }

    #[test]
    fn every_policy_of_a_full_report_has_its_own_colour_and_legend_row() {
        let names: Vec<String> = tierkit_policies::PolicyConfig::names()
            .iter()
            .map(|s| s.to_string())
            .collect();
        let colors = Colors::new(names.iter().cloned());
        let mut used: Vec<&str> = names.iter().map(|n| colors.of(n)).collect();
        used.sort_unstable();
        used.dedup();
        assert_eq!(used.len(), names.len(), "a colour repeats");
        let series: Vec<(String, Vec<f64>)> =
            names.iter().map(|n| (n.clone(), vec![1.0])).collect();
        let svg = bar_chart("t", &["w".into()], &series, "y", &colors);
        let height: f64 = svg
            .split("height=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap()
            .parse()
            .unwrap();
        let last_legend_y = 30.0 + 10.0 + 16.0 * (names.len() - 1) as f64;
        assert!(last_legend_y < height, "legend cut at {height}");
    }
}
