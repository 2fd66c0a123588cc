//! The latency plot: one panel per load, percentiles on the x axis, one bar per target,
//! latency on a logarithmic y axis. Plain SVG written here, no dependency.

use std::fmt::Write as _;

/// One panel: a title and, per target, its name and its latencies (ms) at `QUANTILES`.
pub struct Panel {
    pub title: String,
    pub series: Vec<(String, Vec<f64>)>,
}

pub const QUANTILES: [(f64, &str); 4] = [(0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p99.9")];

const COLOURS: [&str; 6] = ["#7f7f7f", "#2ca02c", "#1f77b4", "#ff7f0e", "#d62728", "#9467bd"];
const PANEL_W: f64 = 470.0;
const PANEL_H: f64 = 340.0;
const LEFT: f64 = 60.0;
const TOP: f64 = 56.0;
const BOTTOM: f64 = 50.0;

/// The whole figure, panels side by side with a shared legend below.
pub fn svg(title: &str, panels: &[Panel]) -> String {
    let width = PANEL_W * panels.len() as f64;
    let names: Vec<&str> =
        panels.first().map(|p| p.series.iter().map(|(n, _)| n.as_str()).collect()).unwrap_or_default();
    let per_row = names.len().clamp(1, 4);
    let legend_rows = names.len().div_ceil(per_row);
    let height = PANEL_H + 16.0 + 20.0 * legend_rows as f64;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{}</text>
"#,
        width / 2.0,
        escape(title)
    );
    for (i, panel) in panels.iter().enumerate() {
        draw_panel(&mut out, panel, PANEL_W * i as f64);
    }
    for (i, name) in names.iter().enumerate() {
        let x = LEFT + 10.0 + (i % per_row) as f64 * (width - LEFT - 20.0) / per_row as f64;
        let y = PANEL_H + 10.0 + 20.0 * (i / per_row) as f64;
        let _ = writeln!(
            out,
            r#"<rect x="{x}" y="{}" width="12" height="12" fill="{}"/><text x="{}" y="{y}">{}</text>"#,
            y - 10.0,
            COLOURS[i % COLOURS.len()],
            x + 18.0,
            escape(name)
        );
    }
    out.push_str("</svg>\n");
    out
}

fn draw_panel(out: &mut String, panel: &Panel, x0: f64) {
    let values = panel.series.iter().flat_map(|(_, v)| v.iter().copied()).filter(|v| v.is_finite() && *v > 0.0);
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if lo > hi { (0.01, 1.0) } else { (lo, hi) };
    // Decades that hold every value.
    let (d_lo, d_hi) = (lo.log10().floor() as i32, hi.log10().ceil().max(lo.log10().floor() + 1.0) as i32);
    let plot_w = PANEL_W - LEFT - 20.0;
    let plot_h = PANEL_H - TOP - BOTTOM;
    let y_of = |v: f64| TOP + plot_h * (1.0 - (v.log10() - f64::from(d_lo)) / f64::from(d_hi - d_lo));
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle" font-size="13">{}</text>"#,
        x0 + LEFT + plot_w / 2.0,
        TOP - 10.0,
        escape(&panel.title)
    );
    for d in d_lo..=d_hi {
        for m in [1.0, 2.0, 5.0] {
            let v = m * 10f64.powi(d);
            if d == d_hi && m > 1.0 {
                break;
            }
            let y = y_of(v);
            let (stroke, label) = if m == 1.0 { ("#bbbbbb", true) } else { ("#eeeeee", m == 2.0 || m == 5.0) };
            let _ = writeln!(
                out,
                r#"<line x1="{}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="{stroke}"/>"#,
                x0 + LEFT,
                x0 + LEFT + plot_w
            );
            if label {
                let _ = writeln!(
                    out,
                    r#"<text x="{}" y="{:.1}" text-anchor="end" font-size="10">{}</text>"#,
                    x0 + LEFT - 4.0,
                    y + 3.0,
                    ms_label(v)
                );
            }
        }
    }
    let _ = writeln!(
        out,
        r#"<text transform="translate({},{}) rotate(-90)" text-anchor="middle" font-size="11">latency (ms, log scale)</text>"#,
        x0 + 14.0,
        TOP + plot_h / 2.0
    );
    let group_w = plot_w / QUANTILES.len() as f64;
    let bar_w = (group_w - 16.0) / panel.series.len().max(1) as f64;
    for (g, (_, label)) in QUANTILES.iter().enumerate() {
        let gx = x0 + LEFT + group_w * g as f64 + 8.0;
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{label}</text>"#,
            gx + (group_w - 16.0) / 2.0,
            TOP + plot_h + 16.0
        );
        for (s, (name, values)) in panel.series.iter().enumerate() {
            let Some(&v) = values.get(g).filter(|v| v.is_finite() && **v > 0.0) else { continue };
            let y = y_of(v);
            let x = gx + bar_w * s as f64;
            let _ = writeln!(
                out,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{} {label}: {v:.3} ms</title></rect>"#,
                (bar_w - 1.0).max(1.0),
                (TOP + plot_h - y).max(0.5),
                COLOURS[s % COLOURS.len()],
                escape(name)
            );
        }
    }
    let _ = writeln!(
        out,
        r##"<rect x="{}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888888"/>"##,
        x0 + LEFT
    );
}

fn ms_label(v: f64) -> String {
    let decimals = (-v.log10().floor()).max(0.0) as usize;
    format!("{v:.decimals$}")
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
