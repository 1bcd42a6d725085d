//! The HTML report: one self-contained file (inline CSS and SVG, no script, no CDN) that
//! opens offline. Per phase: the table, latency by percentile per request, throughput
//! over time and latency over time.

use std::fmt::Write as _;

use super::report::{ms, Report, Row};
use super::stats::Results;

const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22",
];
const PERCENTILES: &[f64] = &[0.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99, 100.0];
const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 260.0;
const MARGIN_LEFT: f64 = 64.0;
const MARGIN_BOTTOM: f64 = 36.0;
const MARGIN_TOP: f64 = 24.0;
const MARGIN_RIGHT: f64 = 170.0;

struct Series {
    name: String,
    points: Vec<(f64, f64)>,
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>floe bench: {w}</title>\
         <style>body{{font-family:system-ui,sans-serif;margin:24px;color:#222}}\
         table{{border-collapse:collapse;font-size:13px;margin:8px 0}}\
         td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}\
         td:first-child,th:first-child{{text-align:left}}tr.group{{font-style:italic}}\
         .ko{{color:#b00}}svg{{display:block;margin:8px 0 20px}}h2{{margin-top:32px}}\
         </style></head><body><h1>floe bench: {w}</h1><table>",
        w = escape(&report.workload)
    );
    for (k, v) in &report.meta {
        let _ = write!(out, "<tr><td>{}</td><td>{}</td></tr>", escape(k), escape(v));
    }
    out.push_str("</table>");
    for e in &report.expectations {
        let class = if e.met() { "" } else { " class=\"ko\"" };
        let _ = write!(
            out,
            "<p{class}>expect {}: {} (got {})</p>",
            escape(&e.what),
            e.expected,
            e.actual
        );
    }
    let rows = report.rows();
    for phase in &report.phases {
        let _ = write!(
            out,
            "<h2>{} <small>({}, {:.2} s)</small></h2>",
            escape(&phase.name),
            escape(&phase.load),
            phase.results.elapsed.as_secs_f64()
        );
        table(&mut out, rows.iter().filter(|r| r.phase == phase.name));
        let percentiles = percentile_series(&phase.results);
        out.push_str(&chart(
            "Latency by percentile (ms, log scale)",
            "percentile",
            &percentiles,
            true,
            true,
        ));
        let (throughput, latency) = timeline_series(&phase.results);
        out.push_str(&chart(
            "Throughput over time (requests/s)",
            "second",
            &throughput,
            false,
            false,
        ));
        out.push_str(&chart(
            "Latency over time (ms, log scale)",
            "second",
            &latency,
            true,
            false,
        ));
    }
    out.push_str("</body></html>\n");
    out
}

fn table<'a>(out: &mut String, rows: impl Iterator<Item = &'a Row>) {
    out.push_str(
        "<table><tr><th>request</th><th>count</th><th>OK</th><th>KO</th><th>retries</th>\
         <th>mean</th><th>min</th><th>p50</th><th>p75</th><th>p99</th><th>max</th>\
         <th>req/s</th><th>errors</th></tr>",
    );
    for r in rows {
        let errors: Vec<String> = r.errors.iter().map(|(k, v)| format!("{k} ×{v}")).collect();
        let _ = write!(
            out,
            "<tr{}><td>{}</td><td>{}</td><td>{}</td><td{}>{}</td><td>{}</td><td>{:.3}</td>\
             <td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td>\
             <td>{:.1}</td><td>{}</td></tr>",
            if r.is_group { " class=\"group\"" } else { "" },
            escape(&r.request),
            r.count,
            r.ok,
            if r.ko > 0 { " class=\"ko\"" } else { "" },
            r.ko,
            r.retries,
            r.mean,
            r.min,
            r.p50,
            r.p75,
            r.p99,
            r.max,
            r.throughput,
            escape(&errors.join(", "))
        );
    }
    out.push_str("</table><p><small>latencies in ms</small></p>");
}

fn percentile_series(results: &Results) -> Vec<Series> {
    results
        .requests
        .iter()
        .filter(|(_, s)| !s.is_group && !s.latency.is_empty())
        .map(|(name, s)| Series {
            name: name.clone(),
            points: PERCENTILES
                .iter()
                .enumerate()
                .map(|(i, p)| (i as f64, ms(s.latency.value_at_percentile(*p))))
                .collect(),
        })
        .collect()
}

fn timeline_series(results: &Results) -> (Vec<Series>, Vec<Series>) {
    let at = |f: &dyn Fn(&super::stats::Second) -> f64| -> Vec<(f64, f64)> {
        results
            .timeline
            .iter()
            .enumerate()
            .map(|(i, s)| (i as f64, f(s)))
            .collect()
    };
    let q = |q: f64| {
        move |s: &super::stats::Second| {
            if s.latency.is_empty() {
                f64::NAN
            } else {
                ms(s.latency.value_at_quantile(q))
            }
        }
    };
    let throughput = vec![
        Series {
            name: "OK/s".into(),
            points: at(&|s| s.ok as f64),
        },
        Series {
            name: "KO/s".into(),
            points: at(&|s| s.ko as f64),
        },
    ];
    let latency = vec![
        Series {
            name: "p50".into(),
            points: at(&q(0.5)),
        },
        Series {
            name: "p99".into(),
            points: at(&q(0.99)),
        },
    ];
    (throughput, latency)
}

/// A line chart as inline SVG; `percentile_axis` labels x with [`PERCENTILES`].
fn chart(
    title: &str,
    x_name: &str,
    series: &[Series],
    log_y: bool,
    percentile_axis: bool,
) -> String {
    let finite = |v: &f64| v.is_finite() && (!log_y || *v > 0.0);
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(finite)
        .collect();
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         font-size=\"11\"><text x=\"{MARGIN_LEFT}\" y=\"14\" font-weight=\"bold\">{}</text>",
        escape(title)
    );
    if ys.is_empty() {
        svg.push_str("<text x=\"80\" y=\"80\">no data</text></svg>");
        return svg;
    }
    let x_max = xs.fold(1.0_f64, f64::max);
    let (mut y_lo, mut y_hi) = ys
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), y| (lo.min(*y), hi.max(*y)));
    let tr = |y: f64| if log_y { y.log10() } else { y };
    if log_y {
        y_lo = 10f64.powf(y_lo.log10().floor());
        y_hi = 10f64.powf(y_hi.log10().ceil().max(y_lo.log10() + 1.0));
    } else {
        y_lo = 0.0;
        y_hi = 4.0 * nice_step(y_hi.max(1e-9) / 4.0);
    }
    let plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
    let plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM;
    let px = |x: f64| MARGIN_LEFT + x / x_max * plot_w;
    let py = |y: f64| MARGIN_TOP + plot_h - (tr(y) - tr(y_lo)) / (tr(y_hi) - tr(y_lo)) * plot_h;
    let _ = write!(
        svg,
        "<rect x=\"{MARGIN_LEFT}\" y=\"{MARGIN_TOP}\" width=\"{plot_w}\" height=\"{plot_h}\" \
         fill=\"none\" stroke=\"#999\"/>"
    );
    let ticks: Vec<f64> = if log_y {
        let (a, b) = (y_lo.log10() as i32, y_hi.log10() as i32);
        (a..=b).map(|e| 10f64.powi(e)).collect()
    } else {
        let step = nice_step(y_hi / 4.0);
        (0..=4).map(|i| step * i as f64).collect()
    };
    for t in ticks {
        let y = py(t);
        let _ = write!(
            svg,
            "<line x1=\"{MARGIN_LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            MARGIN_LEFT + plot_w,
            MARGIN_LEFT - 4.0,
            y + 4.0,
            trim_number(t)
        );
    }
    let x_ticks: Vec<(f64, String)> = if percentile_axis {
        PERCENTILES
            .iter()
            .enumerate()
            .map(|(i, p)| (i as f64, format!("{p}")))
            .collect()
    } else {
        let step = nice_step(x_max / 5.0).max(1.0);
        (0..)
            .map(|i| step * i as f64)
            .take_while(|x| *x <= x_max)
            .map(|x| (x, format!("{x:.0}")))
            .collect()
    };
    for (x, label) in x_ticks {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text>",
            px(x),
            MARGIN_TOP + plot_h + 14.0
        );
    }
    let _ = write!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{x_name}</text>",
        MARGIN_LEFT + plot_w / 2.0,
        HEIGHT - 4.0
    );
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<String> = s
            .points
            .iter()
            .filter(|p| finite(&p.1))
            .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
            .collect();
        let _ = write!(
            svg,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>\
             <rect x=\"{:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{color}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            points.join(" "),
            WIDTH - MARGIN_RIGHT + 10.0,
            MARGIN_TOP + 14.0 * i as f64,
            WIDTH - MARGIN_RIGHT + 24.0,
            MARGIN_TOP + 14.0 * i as f64 + 9.0,
            escape(&s.name)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// The smallest of 1, 2 or 5 times a power of ten that is at least `rough`.
fn nice_step(rough: f64) -> f64 {
    let power = 10f64.powf(rough.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|step| *step >= rough)
        .unwrap_or(10.0 * power)
}

fn trim_number(v: f64) -> String {
    if v >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}
