//! `--plot FILE.svg`: admitted and rejected requests over time, one lane
//! per algorithm, so that the table's numbers can be seen.
//!
//! Each request is a mark at its arrival time: filled green when admitted,
//! hollow red when rejected (told apart by shape as well as colour).
//! Requests at the same instant are stacked, so ten at 9.9 s show as ten.
//! The queueing rows also show, in a strip under their marks, when each
//! admitted request was processed, with a faint line from its arrival: the
//! wait. Dashed vertical lines are the window boundaries (multiples of the
//! period, as the window algorithms align them).
//!
//! Floats appear only here, in drawing coordinates; every decision and
//! count drawn comes from the [`Report`].

use super::render::{Source, seconds};
use super::{Outcome, Report, Trace, period_text};
use std::fmt::Write as _;

/// The time axis's length: at least this, and longer (up to the most)
/// until the two closest instants are `GAP_PX` apart.
const MIN_AXIS: f64 = 800.0;
const MAX_AXIS: f64 = 2200.0;
const GAP_PX: f64 = 8.0;
const LEFT: f64 = 175.0;
const RIGHT: f64 = 30.0;
const LANES_TOP: f64 = 78.0;
const LANE_GAP: f64 = 6.0;
const PAD: f64 = 8.0;
/// The tallest stack of marks a lane gives room for; taller stacks squeeze.
const STACK_ROOM: f64 = 110.0;
/// The widest a mark is drawn; narrower when instants are closer.
const MARK_W: f64 = 7.0;
/// The strip of processing times under a queueing row's marks.
const STRIP: f64 = 16.0;
const AXIS: f64 = 46.0;
/// More window boundaries than this would be a grey wash: not drawn.
const MAX_BOUNDARIES: u64 = 150;

const ADMITTED: &str = "#2ca02c";
const ADMITTED_EDGE: &str = "#1a6e1a";
const REJECTED: &str = "#d62728";
const PROCESSED: &str = "#1f5fbf";

/// The drawing's geometry, shared by its parts.
struct Frame {
    /// The drawing's width (px).
    width: f64,
    /// Milliseconds since the report's origin at the right edge.
    end_ms: u64,
    period_ms: u64,
    /// Height of one stacked mark (with its gap).
    step: f64,
    /// Width of a mark: instants apart are drawn apart (9.9 s and 10.1 s
    /// on either side of the boundary at 10 s).
    mark_w: f64,
    /// Height of a lane without its strip.
    lane_h: f64,
    /// Per request: its place in the stack of its instant (0 = bottom).
    stack: Vec<usize>,
}

impl Frame {
    fn new(report: &Report, trace: &Trace) -> Frame {
        let rel = |t: u64| t - report.origin_ms;
        let count = report.setup.count;
        let last_arrival = trace.arrivals.iter().map(|a| rel(a.at_ms)).max();
        let last_done = report
            .outcomes
            .iter()
            .filter_map(|o| o.queue.as_ref())
            .flat_map(|q| q.done_units.iter().flatten())
            .map(|u| u.div_ceil(count))
            .max();
        let last = last_arrival.max(last_done).unwrap_or(0);
        let period = report.setup.period_ms;
        let end_ms = (last / period + 1) * period;
        let stack = stacks(trace);
        let tallest = stack.iter().max().map_or(1, |s| s + 1) as f64;
        let step = (STACK_ROOM / tallest).min(9.0);
        let mut instants: Vec<u64> = trace.arrivals.iter().map(|a| rel(a.at_ms)).collect();
        instants.sort_unstable();
        instants.dedup();
        let closest = instants.windows(2).map(|w| w[1] - w[0]).min();
        let axis_w = closest.map_or(MIN_AXIS, |ms| {
            (GAP_PX * end_ms as f64 / ms as f64).clamp(MIN_AXIS, MAX_AXIS)
        });
        let px_per_ms = axis_w / end_ms as f64;
        let mark_w = closest.map_or(MARK_W, |ms| {
            (ms as f64 * px_per_ms * 0.7).clamp(2.0, MARK_W)
        });
        Frame {
            width: LEFT + axis_w + RIGHT,
            end_ms,
            period_ms: period,
            step,
            mark_w,
            lane_h: (tallest * step + 2.0 * PAD).max(48.0),
            stack,
        }
    }

    fn x(&self, ms: f64) -> f64 {
        LEFT + ms * (self.width - LEFT - RIGHT) / self.end_ms as f64
    }

    fn draws_boundaries(&self) -> bool {
        self.end_ms / self.period_ms <= MAX_BOUNDARIES
    }

    fn lane_height(&self, o: &Outcome) -> f64 {
        self.lane_h + if o.queue.is_some() { STRIP } else { 0.0 }
    }
}

/// Each request's place among those arriving at the same instant, in
/// input order.
fn stacks(trace: &Trace) -> Vec<usize> {
    let mut seen = std::collections::HashMap::new();
    trace
        .arrivals
        .iter()
        .map(|a| {
            let n = seen.entry(a.at_ms).or_insert(0);
            *n += 1;
            *n - 1
        })
        .collect()
}

/// The SVG document.
pub fn svg(report: &Report, trace: &Trace, source: Source<'_>) -> String {
    let frame = Frame::new(report, trace);
    let lanes_h: f64 = report
        .outcomes
        .iter()
        .map(|o| frame.lane_height(o) + LANE_GAP)
        .sum();
    let height = LANES_TOP + lanes_h + AXIS;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">"#,
        w = f(frame.width),
        h = f(height)
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    header(&mut s, &frame, report, source);
    let mut top = LANES_TOP;
    for (n, o) in report.outcomes.iter().enumerate() {
        lane(&mut s, &frame, report, trace, o, top, n);
        top += frame.lane_height(o) + LANE_GAP;
    }
    boundaries(&mut s, &frame, top - LANE_GAP);
    axis(&mut s, &frame, report, top);
    s.push_str("</svg>\n");
    s
}

/// The title and the legend.
fn header(s: &mut String, frame: &Frame, report: &Report, source: Source<'_>) {
    let setup = &report.setup;
    let _ = writeln!(
        s,
        r#"<text x="12" y="24" font-size="16" font-weight="bold">sluice simulate: {}, {} requests, rate {}, burst {}</text>"#,
        escape(&source.title()),
        report.requests,
        setup.rate_text(),
        setup.burst
    );
    let every = period_text(setup.period_ms);
    let windows = if frame.draws_boundaries() {
        format!("window boundary (every {every})")
    } else {
        format!("window boundaries (every {every}) not drawn: too many")
    };
    let y = 50.0;
    let rect = |fill: &str, stroke: &str| {
        format!(
            r#"<rect x="1" y="{}" width="9" height="9" fill="{fill}" stroke="{stroke}" stroke-width="1.2"/>"#,
            f(y - 5.0)
        )
    };
    let items = [
        (rect(ADMITTED, ADMITTED_EDGE), "admitted".to_string(), 100.0),
        (rect("white", REJECTED), "rejected".to_string(), 100.0),
        (
            format!(
                r#"<path d="M1 {} l4 -8 l4 8 z" fill="{PROCESSED}"/>"#,
                f(y + 4.0)
            ),
            "processed, after its wait (queueing rows)".to_string(),
            290.0,
        ),
        (
            format!(
                r##"<line x1="5" y1="{}" x2="5" y2="{}" stroke="#777" stroke-dasharray="3 3"/>"##,
                f(y - 7.0),
                f(y + 6.0)
            ),
            windows,
            0.0,
        ),
    ];
    let mut x = 12.0;
    for (mark, label, width) in items {
        let _ = writeln!(
            s,
            r#"<g transform="translate({})">{mark}<text x="16" y="{}" font-size="12">{label}</text></g>"#,
            f(x),
            f(y + 4.0)
        );
        x += width;
    }
}

/// One algorithm's lane: its name and counts, its marks, its strip.
fn lane(
    s: &mut String,
    frame: &Frame,
    report: &Report,
    trace: &Trace,
    o: &Outcome,
    top: f64,
    n: usize,
) {
    let name = o.row.name();
    let h = frame.lane_height(o);
    let fill = if n % 2 == 0 { "#f4f6f8" } else { "#eaedf0" };
    let _ = writeln!(s, r#"<g class="lane" data-algorithm="{name}">"#);
    let _ = writeln!(
        s,
        r#"<rect x="0" y="{}" width="{}" height="{}" fill="{fill}"/>"#,
        f(top),
        f(frame.width),
        f(h)
    );
    let mut label = vec![format!("{} of {} allowed", o.allowed, report.requests)];
    if let Some(q) = &o.queue {
        label.push(format!("longest wait {}", seconds(q.max_wait_ms)));
    }
    // The name and its lines of detail, centred in the lane.
    let mut y = top + h / 2.0 - 7.0 * label.len() as f64 + 5.0;
    let _ = writeln!(
        s,
        r#"<text x="12" y="{}" font-size="14" font-weight="bold">{name}</text>"#,
        f(y)
    );
    for line in label {
        y += 14.0;
        let _ = writeln!(
            s,
            r##"<text x="12" y="{}" font-size="11" fill="#555">{line}</text>"##,
            f(y)
        );
    }
    let bottom = top + frame.lane_h - PAD;
    if let Some(q) = &o.queue {
        processed(s, frame, report, trace, &q.done_units, bottom);
    }
    for (i, a) in trace.arrivals.iter().enumerate() {
        let xc = frame.x((a.at_ms - report.origin_ms) as f64);
        let y = bottom - (frame.stack[i] + 1) as f64 * frame.step;
        let hgt = (frame.step - 1.5).max(1.0);
        let (class, fill, stroke) = if o.decisions[i] {
            ("admitted", ADMITTED, ADMITTED_EDGE)
        } else {
            ("rejected", "white", REJECTED)
        };
        let _ = writeln!(
            s,
            r#"<rect class="{class}" x="{}" y="{}" width="{}" height="{}" fill="{fill}" stroke="{stroke}" stroke-width="1"/>"#,
            f(xc - frame.mark_w / 2.0),
            f(y + 0.75),
            f(frame.mark_w),
            f(hgt)
        );
    }
    s.push_str("</g>\n");
}

/// A queueing row's processing times: a triangle in the strip under the
/// marks, and a faint line from the request's mark to it.
fn processed(
    s: &mut String,
    frame: &Frame,
    report: &Report,
    trace: &Trace,
    done_units: &[Option<u64>],
    bottom: f64,
) {
    let count = report.setup.count as f64;
    let strip_y = bottom + PAD + STRIP - 4.0;
    for (i, done) in done_units.iter().enumerate() {
        let Some(units) = done else { continue };
        let from_x = frame.x((trace.arrivals[i].at_ms - report.origin_ms) as f64);
        let from_y = bottom - (frame.stack[i] as f64 + 0.5) * frame.step;
        let to_x = frame.x(*units as f64 / count);
        let _ = writeln!(
            s,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{PROCESSED}" stroke-opacity="0.3" stroke-width="1"/>"#,
            f(from_x),
            f(from_y),
            f(to_x),
            f(strip_y - 8.0)
        );
        let _ = writeln!(
            s,
            r#"<path d="M{} {} l4 -8 l4 8 z" fill="{PROCESSED}"/>"#,
            f(to_x - 4.0),
            f(strip_y)
        );
    }
}

/// Dashed lines at the multiples of the period, over every lane.
fn boundaries(s: &mut String, frame: &Frame, lanes_bottom: f64) {
    if !frame.draws_boundaries() {
        return;
    }
    for k in 0..=frame.end_ms / frame.period_ms {
        let x = frame.x((k * frame.period_ms) as f64);
        let _ = writeln!(
            s,
            r##"<line class="window" x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="#777" stroke-width="1" stroke-dasharray="4 3"/>"##,
            f(LANES_TOP - 4.0),
            f(lanes_bottom + 4.0),
            x = f(x)
        );
    }
}

/// The time axis under the lanes: ticks at a round step, in seconds from
/// the origin.
fn axis(s: &mut String, frame: &Frame, report: &Report, top: f64) {
    let y = top + 4.0;
    let _ = writeln!(
        s,
        r##"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#333"/>"##,
        f(LEFT),
        f(y),
        f(frame.width - RIGHT),
        f(y)
    );
    let step = tick_step(frame.end_ms);
    let mut t = 0;
    while t <= frame.end_ms {
        let x = frame.x(t as f64);
        let _ = writeln!(
            s,
            r##"<line x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="#333"/><text x="{x}" y="{}" font-size="11" text-anchor="middle">{}</text>"##,
            f(y),
            f(y + 5.0),
            f(y + 18.0),
            seconds(t),
            x = f(x)
        );
        t += step;
    }
    let origin = if report.origin_ms == 0 {
        "time".to_string()
    } else {
        format!("time after {}", seconds(report.origin_ms))
    };
    let _ = writeln!(
        s,
        r##"<text x="{}" y="{}" font-size="12" text-anchor="middle" fill="#333">{origin}</text>"##,
        f((frame.width + LEFT - RIGHT) / 2.0),
        f(y + 36.0)
    );
}

/// A round tick step (1, 2 or 5 × a power of ten ms) giving at most about
/// a dozen ticks.
fn tick_step(end_ms: u64) -> u64 {
    let mut unit = 1u64;
    loop {
        for m in [1, 2, 5] {
            let step = unit.saturating_mul(m);
            if end_ms / step <= 12 {
                return step;
            }
        }
        unit = unit.saturating_mul(10);
    }
}

fn f(v: f64) -> String {
    format!("{v:.1}")
}

/// Text for an SVG element.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
