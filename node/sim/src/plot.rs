//! The bench matrix as an SVG plot: dispute seen → certificate p99 and KiB
//! sent per node (mean) against N, one line per dissemination and fault mix.
//! Plain SVG text, no plotting library; the same runs give the same bytes.

use crate::Report;
use std::fmt::Write;

const PANEL_W: f64 = 420.0;
const PANEL_H: f64 = 260.0;
const MARGIN_L: f64 = 60.0;
const MARGIN_T: f64 = 40.0;
const GAP: f64 = 90.0;
const LEGEND_H: f64 = 110.0;
const COLORS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
    "#bcbd22", "#7f7f7f",
];

/// One panel's axis: linear or log10 in y, log2 in x.
struct Axis {
    x0: f64,
    n_min: f64,
    n_max: f64,
    y_min: f64,
    y_max: f64,
    log_y: bool,
}

impl Axis {
    fn x(&self, n: f64) -> f64 {
        let span = (self.n_max / self.n_min).log2().max(1.0);
        self.x0 + (n / self.n_min).log2() / span * PANEL_W
    }

    fn y(&self, v: f64) -> f64 {
        let f = if self.log_y {
            (v.max(self.y_min).log10() - self.y_min.log10())
                / (self.y_max.log10() - self.y_min.log10())
        } else {
            (v - self.y_min) / (self.y_max - self.y_min)
        };
        MARGIN_T + PANEL_H * (1.0 - f.clamp(0.0, 1.0))
    }
}

/// `runs`: (series label, report), in any order; series are drawn in the
/// order their first run appears.
pub fn svg(runs: &[(String, Report)]) -> String {
    let mut series: Vec<&str> = Vec::new();
    for (label, _) in runs {
        if !series.contains(&label.as_str()) {
            series.push(label);
        }
    }
    let ns = runs.iter().map(|(_, r)| r.nodes as f64);
    let (n_min, n_max) = ns.fold((f64::MAX, 1.0f64), |(a, b), n| (a.min(n), b.max(n)));
    let p99 = |r: &Report| r.seen_to_certificate_ms.as_ref().map(|p| p.p99);
    let ms_max = runs.iter().filter_map(|(_, r)| p99(r)).fold(100.0f64, f64::max);
    let kib = |r: &Report| r.kib_sent_per_node.mean;
    let kib_max = runs.iter().map(|(_, r)| kib(r)).fold(10.0f64, f64::max);
    let latency = Axis {
        x0: MARGIN_L,
        n_min: n_min.min(n_max),
        n_max,
        y_min: 100.0,
        y_max: 10f64.powf(ms_max.log10().ceil()),
        log_y: true,
    };
    let bytes = Axis {
        x0: MARGIN_L + PANEL_W + GAP,
        y_min: 1.0,
        y_max: 10f64.powf(kib_max.log10().ceil()),
        log_y: true,
        ..latency
    };
    let width = MARGIN_L + 2.0 * PANEL_W + GAP + 30.0;
    let height = MARGIN_T + PANEL_H + 50.0 + LEGEND_H;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{width}" height="{height}" fill="white"/>"#);
    panel(&mut s, &latency, "dispute seen → certificate, p99 (ms, log)", runs, &series, p99);
    panel(&mut s, &bytes, "KiB sent per node per dispute, mean (log)", runs, &series, |r| {
        Some(kib(r))
    });
    for (i, label) in series.iter().enumerate() {
        let (x, y) =
            (MARGIN_L + (i % 2) as f64 * 440.0, MARGIN_T + PANEL_H + 55.0 + (i / 2) as f64 * 18.0);
        let _ = writeln!(
            s,
            r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{}" stroke-width="2"{}/><text x="{}" y="{}">{}</text>"#,
            x + 24.0,
            COLORS[i % COLORS.len()],
            dash(label),
            x + 30.0,
            y + 4.0,
            escape(label)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn dash(label: &str) -> &'static str {
    if label.starts_with("flood") {
        ""
    } else {
        r#" stroke-dasharray="6 3""#
    }
}

fn panel(
    s: &mut String,
    axis: &Axis,
    title: &str,
    runs: &[(String, Report)],
    series: &[&str],
    value: impl Fn(&Report) -> Option<f64>,
) {
    let (x0, x1) = (axis.x0, axis.x0 + PANEL_W);
    let (top, bottom) = (MARGIN_T, MARGIN_T + PANEL_H);
    let _ = writeln!(
        s,
        r#"<text x="{x0}" y="{}" font-weight="bold">{}</text>"#,
        top - 15.0,
        escape(title)
    );
    let _ = writeln!(
        s,
        r##"<rect x="{x0}" y="{top}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#888"/>"##
    );
    // x ticks: every N run.
    let mut ns: Vec<usize> = runs.iter().map(|(_, r)| r.nodes).collect();
    ns.sort_unstable();
    ns.dedup();
    for n in ns {
        let x = axis.x(n as f64);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{bottom}" stroke="#eee"/><text x="{x:.1}" y="{}" text-anchor="middle">{n}</text>"##,
            bottom + 16.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">N</text>"#,
        (x0 + x1) / 2.0,
        bottom + 32.0
    );
    // y ticks: five linear steps, or each power of ten.
    let ticks: Vec<f64> = if axis.log_y {
        let mut t = Vec::new();
        let mut decade = axis.y_min;
        while decade <= axis.y_max * 1.0001 {
            t.extend(
                [1.0, 2.0, 5.0]
                    .map(|k| k * decade)
                    .into_iter()
                    .filter(|v| *v <= axis.y_max * 1.0001),
            );
            decade *= 10.0;
        }
        t
    } else {
        (0..=5).map(|i| axis.y_min + (axis.y_max - axis.y_min) * i as f64 / 5.0).collect()
    };
    for v in ticks {
        let y = axis.y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{v}</text>"##,
            x0 - 6.0,
            y + 4.0
        );
    }
    for (i, label) in series.iter().enumerate() {
        let mut points: Vec<(usize, f64)> = runs
            .iter()
            .filter(|(l, _)| l == label)
            .filter_map(|(_, r)| Some((r.nodes, value(r)?)))
            .collect();
        points.sort_by_key(|p| p.0);
        let path: Vec<String> = points
            .iter()
            .map(|&(n, v)| format!("{:.1},{:.1}", axis.x(n as f64), axis.y(v)))
            .collect();
        let color = COLORS[i % COLORS.len()];
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"{}/>"#,
            path.join(" "),
            dash(label)
        );
        for &(n, v) in &points {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                axis.x(n as f64),
                axis.y(v)
            );
        }
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
