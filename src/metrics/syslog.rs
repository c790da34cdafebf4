//! `sluice_syslog_messages`: the log lines sent to syslog servers, by
//! result (`sent`, `dropped`), read at scrape time from the counters the
//! senders keep ([`crate::errlog::syslog`]). A server that is down, or a
//! unix socket whose reader is slow, shows as `dropped` growing: the lines
//! are never queued, so that a request is never slowed by its log.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;

#[derive(Debug)]
pub(super) struct SyslogMessages;

impl Collector for SyslogMessages {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use crate::errlog::syslog;
        let mut family = encoder.encode_descriptor(
            "sluice_syslog_messages",
            "Log lines sent to syslog servers (error_log and access_log syslog:) by result (sent; dropped: the server's socket would not take them at once)",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for (result, n) in [("sent", syslog::sent()), ("dropped", syslog::dropped())] {
            let labels = super::Outcome { result };
            ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}
