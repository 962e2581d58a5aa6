//! The Prometheus text exposition format, version 0.0.4: `# HELP` and `# TYPE`
//! lines, then one `name{label="value",...} value` line per sample; histograms
//! as `_bucket{le="..."}`, `_sum` and `_count`.

use std::fmt::Write;

use super::histogram::HistogramSnapshot;

/// The Content-Type of a scrape's body.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A metric family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (restarts at 0 with the process).
    Counter,
    /// Goes up and down.
    Gauge,
    /// Buckets, sum and count.
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A scrape's text, built family by family.
#[derive(Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// Starts a family: its HELP and TYPE lines. Its samples follow.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} {}", kind.name());
    }

    /// One sample of an integer value.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        self.line(name, labels, None, &value.to_string());
    }

    /// One sample of a floating-point value.
    pub fn sample_f64(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.line(name, labels, None, &fmt_f64(value));
    }

    /// The samples of one histogram series: cumulative buckets (`le`), the
    /// `+Inf` bucket, `_sum` and `_count`.
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &HistogramSnapshot) {
        let bucket = format!("{name}_bucket");
        for (le, n) in &h.buckets {
            self.line(&bucket, labels, Some(&fmt_f64(*le)), &n.to_string());
        }
        self.line(&bucket, labels, Some("+Inf"), &h.count.to_string());
        self.line(
            &format!("{name}_sum"),
            labels,
            None,
            &fmt_f64(h.sum_seconds),
        );
        self.line(&format!("{name}_count"), labels, None, &h.count.to_string());
    }

    fn line(&mut self, name: &str, labels: &[(&str, &str)], le: Option<&str>, value: &str) {
        self.out.push_str(name);
        if !labels.is_empty() || le.is_some() {
            self.out.push('{');
            let mut first = true;
            for (k, v) in labels.iter().copied().chain(le.map(|le| ("le", le))) {
                if !first {
                    self.out.push(',');
                }
                first = false;
                self.out.push_str(k);
                self.out.push_str("=\"");
                escape_label_into(&mut self.out, v);
                self.out.push('"');
            }
            self.out.push('}');
        }
        self.out.push(' ');
        self.out.push_str(value);
        self.out.push('\n');
    }

    /// The finished text.
    pub fn finish(self) -> String {
        self.out
    }
}

/// A label value with `\`, `"` and line feeds escaped.
fn escape_label_into(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// HELP text with `\` and line feeds escaped.
fn escape_help(h: &str) -> String {
    h.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A float as Prometheus reads it (`+Inf`, `-Inf`, `NaN`; no exponent otherwise).
fn fmt_f64(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_samples_and_escaping() {
        let mut e = Exposition::default();
        e.family("x_total", Kind::Counter, "A \\ help\nline");
        e.sample("x_total", &[("a", "q\"b\\c\nd"), ("b", "2")], 7);
        e.family("g", Kind::Gauge, "g");
        e.sample("g", &[], 3);
        e.sample_f64("g", &[], f64::INFINITY);
        let t = e.finish();
        assert_eq!(
            t,
            "# HELP x_total A \\\\ help\\nline\n# TYPE x_total counter\n\
             x_total{a=\"q\\\"b\\\\c\\nd\",b=\"2\"} 7\n\
             # HELP g g\n# TYPE g gauge\ng 3\ng +Inf\n"
        );
    }

    #[test]
    fn histogram_lines() {
        let mut e = Exposition::default();
        let h = HistogramSnapshot {
            buckets: vec![(0.00001, 1), (0.5, 2)],
            count: 3,
            sum_seconds: 1.25,
        };
        e.histogram("d_seconds", &[("command", "READ")], &h);
        assert_eq!(
            e.finish(),
            "d_seconds_bucket{command=\"READ\",le=\"0.00001\"} 1\n\
             d_seconds_bucket{command=\"READ\",le=\"0.5\"} 2\n\
             d_seconds_bucket{command=\"READ\",le=\"+Inf\"} 3\n\
             d_seconds_sum{command=\"READ\"} 1.25\n\
             d_seconds_count{command=\"READ\"} 3\n"
        );
    }
}
