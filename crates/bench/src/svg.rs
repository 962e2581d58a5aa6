//! Hand-written SVG line charts for sweep results: axes with ticks and labels, linear or
//! logarithmic scales, one polyline per series, and a legend. No plotting dependency.
//!
//! A [`Figure`] stacks one or more [`Chart`] panels vertically. Each series is a
//! `<g class="series" data-series="NAME">` element, so tools (and tests) can find them.

use std::fmt::Write as _;

/// How values map onto an axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Evenly spaced values.
    Linear,
    /// Evenly spaced powers (I/O sizes, latencies spanning decades).
    Log,
}

/// One axis of a chart.
#[derive(Debug, Clone)]
pub struct Axis {
    /// The axis title.
    pub label: String,
    /// Linear or logarithmic.
    pub scale: Scale,
    /// Explicit ticks (value, label); `None` chooses ticks from the data. With explicit
    /// ticks the axis spans exactly the ticks' range (a little padding added).
    pub ticks: Option<Vec<(f64, String)>>,
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// The legend text.
    pub name: String,
    /// (x, y) points, drawn in the order given; non-finite points, and non-positive ones
    /// on a log axis, are left out.
    pub points: Vec<(f64, f64)>,
    /// Index into the palette (series of one target share a colour).
    pub color: usize,
    /// Dashed line (for example p99 next to a solid p50).
    pub dashed: bool,
}

/// One panel: a title, two axes and its series.
#[derive(Debug, Clone)]
pub struct Chart {
    /// The panel title.
    pub title: String,
    /// The horizontal axis.
    pub x: Axis,
    /// The vertical axis.
    pub y: Axis,
    /// The lines.
    pub series: Vec<Series>,
}

/// A whole SVG document: a title over panels stacked top to bottom.
#[derive(Debug, Clone)]
pub struct Figure {
    /// The document title (shown at the top and in `<title>`).
    pub title: String,
    /// The panels.
    pub charts: Vec<Chart>,
}

/// Okabe–Ito colours, distinguishable with the common colour-vision deficiencies.
const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

const WIDTH: f64 = 1000.0;
const PANEL_H: f64 = 400.0;
const TOP: f64 = 40.0; // document title band
const M_LEFT: f64 = 80.0;
const M_RIGHT: f64 = 320.0; // legend column
const M_TOP: f64 = 36.0;
const M_BOTTOM: f64 = 56.0;

/// The colour of palette slot `i` (wrapping).
pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Escapes text for XML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A short number: 950, 1.2k, 34k, 1.5M, 0.25.
pub fn short_number(v: f64) -> String {
    let a = v.abs();
    let (x, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = if (x == x.trunc() && x.abs() < 1e4) || x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    };
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s}{suffix}")
}

/// A size in bytes as 512, 4K, 64K, 1M, 1.5M.
pub fn short_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    for (unit, name) in UNITS {
        if bytes >= unit {
            return if bytes.is_multiple_of(unit) {
                format!("{}{name}", bytes / unit)
            } else {
                let v = bytes as f64 / unit as f64;
                format!("{}{name}", short_number((v * 100.0).round() / 100.0))
            };
        }
    }
    bytes.to_string()
}

/// A mapping from data values to pixels along one axis.
struct Mapper {
    scale: Scale,
    lo: f64,
    hi: f64,
    p0: f64,
    p1: f64,
}

impl Mapper {
    fn t(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear => v,
            Scale::Log => v.log10(),
        }
    }
    fn px(&self, v: f64) -> f64 {
        let (a, b) = (self.t(self.lo), self.t(self.hi));
        let f = if b > a {
            (self.t(v) - a) / (b - a)
        } else {
            0.5
        };
        self.p0 + f * (self.p1 - self.p0)
    }
}

fn usable(scale: Scale, v: f64) -> bool {
    v.is_finite() && (scale == Scale::Linear || v > 0.0)
}

/// A "nice" step (1, 2 or 5 × 10^k) giving about `n` intervals over `span`.
fn nice_step(span: f64, n: f64) -> f64 {
    let raw = (span / n).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// The range and ticks of an axis over the given data values.
fn layout(axis: &Axis, values: &[f64]) -> (f64, f64, Vec<(f64, String)>) {
    let vals: Vec<f64> = values
        .iter()
        .copied()
        .filter(|v| usable(axis.scale, *v))
        .collect();
    if let Some(ticks) = &axis.ticks {
        let ticks: Vec<(f64, String)> = ticks
            .iter()
            .filter(|(v, _)| usable(axis.scale, *v))
            .cloned()
            .collect();
        let lo = ticks.iter().map(|t| t.0).fold(f64::INFINITY, f64::min);
        let hi = ticks.iter().map(|t| t.0).fold(f64::NEG_INFINITY, f64::max);
        if lo.is_finite() && hi.is_finite() {
            let (lo, hi) = match axis.scale {
                Scale::Log if hi > lo => {
                    let pad = (hi / lo).powf(0.05);
                    (lo / pad, hi * pad)
                }
                Scale::Log => (lo / 2.0, hi * 2.0),
                Scale::Linear if hi > lo => {
                    let pad = (hi - lo) * 0.05;
                    (lo - pad, hi + pad)
                }
                Scale::Linear => (lo - 1.0, hi + 1.0),
            };
            return (lo, hi, ticks);
        }
    }
    let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    match axis.scale {
        Scale::Linear => {
            let lo = if lo.is_finite() { lo.min(0.0) } else { 0.0 };
            let hi = if hi.is_finite() && hi > lo {
                hi
            } else {
                lo + 1.0
            };
            let step = nice_step(hi - lo, 5.0);
            let top = (hi / step).ceil() * step;
            let bottom = (lo / step).floor() * step;
            let mut ticks = Vec::new();
            let mut k = 0.0;
            while bottom + k * step <= top + step * 1e-9 && ticks.len() < 50 {
                let v = bottom + k * step;
                ticks.push((v, short_number(v)));
                k += 1.0;
            }
            (bottom, top, ticks)
        }
        Scale::Log => {
            let (lo, hi) = if lo.is_finite() && hi.is_finite() {
                (lo, hi)
            } else {
                (1.0, 10.0)
            };
            let d0 = lo.log10().floor() as i32;
            let mut d1 = hi.log10().ceil() as i32;
            if d1 <= d0 {
                d1 = d0 + 1;
            }
            let mults: &[f64] = if d1 - d0 <= 2 {
                &[1.0, 2.0, 5.0]
            } else {
                &[1.0]
            };
            let mut ticks = Vec::new();
            for d in d0..=d1 {
                for m in mults {
                    let v = m * 10f64.powi(d);
                    if v <= 10f64.powi(d1) * 1.0001 {
                        ticks.push((v, short_number(v)));
                    }
                }
            }
            (10f64.powi(d0), 10f64.powi(d1), ticks)
        }
    }
}

fn render_chart(out: &mut String, c: &Chart, y0: f64) {
    let (px0, px1) = (M_LEFT, WIDTH - M_RIGHT);
    let (py0, py1) = (y0 + PANEL_H - M_BOTTOM, y0 + M_TOP);
    let xs: Vec<f64> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let ys: Vec<f64> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .collect();
    let (xlo, xhi, xticks) = layout(&c.x, &xs);
    let (ylo, yhi, yticks) = layout(&c.y, &ys);
    let mx = Mapper {
        scale: c.x.scale,
        lo: xlo,
        hi: xhi,
        p0: px0,
        p1: px1,
    };
    let my = Mapper {
        scale: c.y.scale,
        lo: ylo,
        hi: yhi,
        p0: py0,
        p1: py1,
    };
    let _ = writeln!(
        out,
        r#"<g class="chart" data-title="{}">"#,
        escape(&c.title)
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#,
        (px0 + px1) / 2.0,
        y0 + 22.0,
        escape(&c.title)
    );
    // Grid and ticks.
    let _ = writeln!(out, r##"<g class="axis x" font-size="12" fill="#333">"##);
    for (v, label) in &xticks {
        if *v < xlo || *v > xhi {
            continue;
        }
        let x = mx.px(*v);
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{py1:.1}" x2="{x:.1}" y2="{py0:.1}" stroke="#e4e4e4"/><line x1="{x:.1}" y1="{py0:.1}" x2="{x:.1}" y2="{:.1}" stroke="#333"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            py0 + 5.0,
            py0 + 19.0,
            escape(label)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="13">{}</text></g>"#,
        (px0 + px1) / 2.0,
        py0 + 40.0,
        escape(&c.x.label)
    );
    let _ = writeln!(out, r##"<g class="axis y" font-size="12" fill="#333">"##);
    for (v, label) in &yticks {
        if *v < ylo * (1.0 - 1e-9) || *v > yhi * (1.0 + 1e-9) {
            continue;
        }
        let y = my.px(*v);
        let _ = writeln!(
            out,
            r##"<line x1="{px0:.1}" y1="{y:.1}" x2="{px1:.1}" y2="{y:.1}" stroke="#e4e4e4"/><line x1="{:.1}" y1="{y:.1}" x2="{px0:.1}" y2="{y:.1}" stroke="#333"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            px0 - 5.0,
            px0 - 8.0,
            y + 4.0,
            escape(label)
        );
    }
    let _ = writeln!(
        out,
        r#"<text transform="translate({:.1},{:.1}) rotate(-90)" text-anchor="middle" font-size="13">{}</text></g>"#,
        M_LEFT - 58.0,
        (py0 + py1) / 2.0,
        escape(&c.y.label)
    );
    let _ = writeln!(
        out,
        r##"<rect x="{px0:.1}" y="{py1:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="#333"/>"##,
        px1 - px0,
        py0 - py1
    );
    // Series.
    for s in &c.series {
        let col = color(s.color);
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|(x, y)| usable(c.x.scale, *x) && usable(c.y.scale, *y))
            .map(|(x, y)| (mx.px(x), my.px(y)))
            .collect();
        let _ = writeln!(
            out,
            r#"<g class="series" data-series="{}">"#,
            escape(&s.name)
        );
        let dash = if s.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let list: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = writeln!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{col}" stroke-width="2"{dash}/>"#,
            list.join(" ")
        );
        for (x, y) in &pts {
            let _ = writeln!(
                out,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{col}"/>"#
            );
        }
        let _ = writeln!(out, "</g>");
    }
    // Legend.
    let lx = px1 + 16.0;
    let _ = writeln!(out, r#"<g class="legend" font-size="12">"#);
    for (i, s) in c.series.iter().enumerate() {
        let ly = py1 + 8.0 + i as f64 * 18.0;
        let dash = if s.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let _ = writeln!(
            out,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 26.0,
            color(s.color),
            lx + 32.0,
            ly + 4.0,
            escape(&ellipsize(&s.name, 40))
        );
    }
    let _ = writeln!(out, "</g>\n</g>");
}

/// Shortens text to at most `max` characters, keeping its end (file names end paths).
pub fn ellipsize(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let tail: String = s.chars().skip(n - (max - 1)).collect();
    format!("…{tail}")
}

/// Renders a figure as a standalone SVG document.
pub fn render(f: &Figure) -> String {
    let h = TOP + PANEL_H * f.charts.len().max(1) as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH:.0}" height="{h:.0}" viewBox="0 0 {WIDTH:.0} {h:.0}" font-family="sans-serif">
<title>{}</title>
<rect width="100%" height="100%" fill="white"/>
<text x="{:.1}" y="26" text-anchor="middle" font-size="17" font-weight="bold">{}</text>"#,
        escape(&f.title),
        WIDTH / 2.0,
        escape(&f.title)
    );
    for (i, c) in f.charts.iter().enumerate() {
        render_chart(&mut out, c, TOP + PANEL_H * i as f64);
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_numbers() {
        assert_eq!(short_size(512), "512");
        assert_eq!(short_size(4096), "4K");
        assert_eq!(short_size(512 * 1024), "512K");
        assert_eq!(short_size(1 << 20), "1M");
        assert_eq!(short_size(3 << 19), "1.5M");
        assert_eq!(short_number(950.0), "950");
        assert_eq!(short_number(12_500.0), "12.5k");
        assert_eq!(short_number(2_000_000.0), "2M");
        assert_eq!(short_number(0.25), "0.25");
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(escape(r#"a<b>&"c'"#), "a&lt;b&gt;&amp;&quot;c&apos;");
        assert_eq!(ellipsize("abcdef", 4), "…def");
        assert_eq!(ellipsize("abc", 4), "abc");
    }

    #[test]
    fn log_ticks_cover_the_data() {
        let axis = Axis {
            label: "µs".into(),
            scale: Scale::Log,
            ticks: None,
        };
        let (lo, hi, ticks) = layout(&axis, &[35.0, 4200.0, -1.0, f64::NAN]);
        assert!(lo <= 35.0 && hi >= 4200.0);
        assert_eq!(ticks.first().map(|t| t.0), Some(10.0));
        assert_eq!(ticks.last().map(|t| t.0), Some(10_000.0));
        let axis = Axis {
            scale: Scale::Linear,
            ..axis
        };
        let (lo, hi, ticks) = layout(&axis, &[3.0, 97.0]);
        assert_eq!((lo, hi), (0.0, 100.0));
        assert_eq!(ticks.len(), 6);
    }

    #[test]
    fn one_group_per_series() {
        let chart = Chart {
            title: "t <1>".into(),
            x: Axis {
                label: "I/O size".into(),
                scale: Scale::Log,
                ticks: Some(vec![(4096.0, "4K".into()), (65536.0, "64K".into())]),
            },
            y: Axis {
                label: "latency".into(),
                scale: Scale::Log,
                ticks: None,
            },
            series: (0..3)
                .map(|i| Series {
                    name: format!("s{i}"),
                    points: vec![(4096.0, 10.0 + i as f64), (65536.0, 100.0)],
                    color: i,
                    dashed: i == 1,
                })
                .collect(),
        };
        let svg = render(&Figure {
            title: "fig & co".into(),
            charts: vec![chart.clone(), chart],
        });
        assert_eq!(svg.matches(r#"<g class="series""#).count(), 6);
        assert_eq!(svg.matches("<polyline").count(), 6);
        assert!(svg.contains("t &lt;1&gt;") && svg.contains("fig &amp; co"));
        assert!(svg.ends_with("</svg>\n"));
    }
}
