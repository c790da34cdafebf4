//! Responses by status and their durations: one atomic per status code and
//! per histogram bucket, so that counting a response never takes a lock
//! (it is paid on every request).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Responses by status code: one atomic per code, so that counting a
/// response never takes a lock.
#[derive(Clone, Debug)]
pub(super) struct StatusCounts(Arc<[AtomicU64]>);

impl Default for StatusCounts {
    fn default() -> Self {
        StatusCounts((100..1000).map(|_| AtomicU64::new(0)).collect())
    }
}

impl StatusCounts {
    pub(super) fn inc(&self, status: u16) {
        if let Some(c) = status
            .checked_sub(100)
            .and_then(|i| self.0.get(usize::from(i)))
        {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Collector for StatusCounts {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "sluice_http_responses",
            "Responses sent to clients by status code",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for (i, c) in self.0.iter().enumerate() {
            let n = c.load(Ordering::Relaxed);
            if n > 0 {
                let l = [("code", (i + 100).to_string())];
                ConstCounter::new(n).encode(family.encode_family(&l)?)?;
            }
        }
        Ok(())
    }
}

/// Upper bounds of the request-duration buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// A histogram of durations kept in atomics (prometheus-client's takes a
/// lock per observation): a count per bucket plus +Inf, and the sum in
/// microseconds.
#[derive(Clone, Debug, Default)]
pub(super) struct AtomicHistogram(Arc<HistogramCells>);

#[derive(Debug, Default)]
struct HistogramCells {
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_us: AtomicU64,
}

impl AtomicHistogram {
    pub(super) fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(BUCKETS.len());
        self.0.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.0
            .sum_us
            .fetch_add(d.as_micros() as u64, Ordering::Relaxed);
    }
}

impl EncodeMetric for AtomicHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let counts: Vec<u64> = self
            .0
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let buckets: Vec<(f64, u64)> = BUCKETS
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(counts.iter().copied())
            .collect();
        let sum = self.0.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        encoder.encode_histogram::<NoLabelSet>(sum, counts.iter().sum(), &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}
