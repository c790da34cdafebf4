//! The one in-process upstream of the tests: raw tokio, independent of the sluice library,
//! reading requests with [`super::http1::Reader`].
//!
//! By default it answers every request with `200 OK` and a `text/plain` body that echoes the
//! request line and header lines as received (so a test sees what the proxy forwarded). It keeps
//! connections alive unless the request asks for `close` or is HTTP/1.0 (nginx's default for
//! proxy_pass), and counts the requests it read. [`Options`] change the answer; a request can
//! also ask, with `X-Echo-Status: N` for status N, with each `X-Echo-Header: Name: value` for one
//! more response header (to see what a proxy does with the upstream's headers), and with
//! `X-Echo-Delay: MS` for its answer held that long (for `proxy_read_timeout`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::task::{JoinHandle, JoinSet};

use super::http1::{Message, Reader};

/// What the answer's body is, or that there is none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Answer {
    /// The request head as received, and its CRLF.
    #[default]
    Head,
    /// The request's body (de-chunked), its length in `X-Length` too.
    Body,
    /// The upstream's own port, so a client sees which server of a group answered.
    Port,
    /// No answer: the connection is closed once the request is read.
    Close,
    /// No answer ever: requests are read and the connection held.
    Never,
    /// Nothing read and no answer: the connection is held, and what a proxy sends on it fills
    /// the socket's buffers (for `proxy_send_timeout`).
    Silent,
}

/// How an [`Upstream`] answers.
#[derive(Clone, Debug)]
pub struct Options {
    /// A name every answer carries (`X-Echo: NAME`, and `X-Echo-Seq: N`, the request's number on
    /// its connection: above 1 shows a kept-alive upstream connection), with headers a proxy may
    /// hide or pass (`Server`, `X-Powered-By`, `X-Internal`). For the import corpus, where nginx
    /// and sluice proxy to the same servers and a reply has to say which one answered.
    pub name: Option<String>,
    /// Every answer held this long after its request arrived: the requests a proxy forwards
    /// stay in flight that long (for `limit_conn`).
    pub delay: Duration,
    /// The status of an answer its request does not ask another of.
    pub status: u16,
    pub answer: Answer,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            name: None,
            delay: Duration::ZERO,
            status: 200,
            answer: Answer::Head,
        }
    }
}

/// An upstream on 127.0.0.1; it stops when dropped.
pub struct Upstream {
    pub addr: SocketAddr,
    /// [`Options::name`], or empty.
    pub name: String,
    hits: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Upstream {
    /// The echo: binds 127.0.0.1 on a free port. Must be called inside a tokio runtime.
    pub fn start() -> Upstream {
        Upstream::with(Options::default())
    }

    /// The echo, holding every answer for `delay`.
    pub fn start_slow(delay: Duration) -> Upstream {
        Upstream::with(Options {
            delay,
            ..Options::default()
        })
    }

    /// The echo named `name` ([`Options::name`]).
    pub fn named(name: &str) -> Upstream {
        Upstream::with(Options {
            name: Some(name.to_owned()),
            ..Options::default()
        })
    }

    /// One answering `answer` with `status`.
    pub fn answering(answer: Answer, status: u16) -> Upstream {
        Upstream::with(Options {
            answer,
            status,
            ..Options::default()
        })
    }

    pub fn with(options: Options) -> Upstream {
        let listener = super::ports::local_listener("upstream");
        let addr = listener.local_addr().expect("upstream address");
        let hits = Arc::new(AtomicUsize::new(0));
        let name = options.name.clone().unwrap_or_default();
        let (counter, options) = (Arc::clone(&hits), Arc::new(options));
        let task = tokio::spawn(async move {
            // Connection tasks live in the JoinSet: aborting this task aborts them all.
            let mut conns = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        if let Ok((stream, _)) = accepted {
                            let (hits, options) = (Arc::clone(&counter), Arc::clone(&options));
                            conns.spawn(serve(stream, addr.port(), hits, options));
                        }
                    }
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
        });
        Upstream {
            addr,
            name,
            hits,
            task,
        }
    }

    /// Requests read so far.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(stream: TcpStream, port: u16, hits: Arc<AtomicUsize>, options: Arc<Options>) {
    if options.answer == Answer::Silent {
        let _held = stream;
        return std::future::pending().await;
    }
    let mut conn = Reader::new(stream);
    for seq in 1.. {
        let Some(request) = conn.request().await else {
            return;
        };
        hits.fetch_add(1, Ordering::SeqCst);
        match options.answer {
            Answer::Close => return,
            Answer::Never => continue,
            _ => {}
        }
        let asked = request
            .header("x-echo-delay")
            .and_then(|v| v.parse().ok())
            .map(Duration::from_millis);
        let delay = asked.unwrap_or(options.delay);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let close = request.closes();
        let answer = answer(&request, &options, port, seq, close);
        if conn.write_all(&answer).await.is_err() || close {
            let _ = conn.shutdown().await;
            return;
        }
    }
}

/// The whole answer to `request`, the `seq`th on its connection.
fn answer(request: &Message, options: &Options, port: u16, seq: usize, close: bool) -> Vec<u8> {
    let mut status = match options.status {
        200 => "200 OK".to_owned(),
        n => format!("{n} Echo"),
    };
    let mut head = String::new();
    if let Some(name) = &options.name {
        head.push_str(&format!(
            "Server: echo/1\r\nX-Powered-By: echo\r\nX-Internal: secret\r\n\
             X-Echo: {name}\r\nX-Echo-Seq: {seq}\r\n"
        ));
    }
    let mut extra = String::new();
    for (name, value) in &request.headers {
        if name.eq_ignore_ascii_case("x-echo-status") {
            status = format!("{value} Echo");
        } else if name.eq_ignore_ascii_case("x-echo-header") {
            extra.push_str(&format!("{value}\r\n"));
        }
    }
    let body = match options.answer {
        Answer::Body => {
            head.push_str(&format!("X-Length: {}\r\n", request.body.len()));
            request.body.clone()
        }
        Answer::Port => port.to_string().into_bytes(),
        _ => format!("{}\r\n", request.head).into_bytes(),
    };
    let connection = if close { "close" } else { "keep-alive" };
    let mut out = format!(
        "HTTP/1.1 {status}\r\n{head}Content-Type: text/plain\r\nContent-Length: {}\r\n\
         Connection: {connection}\r\n{extra}\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}
