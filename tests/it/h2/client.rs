//! A client of HTTP/2 (h2c with prior knowledge) that the tests drive stream by stream, over one
//! connection: each stream timed from the moment it was sent, answered as a [`Reply`] like the
//! HTTP/1.1 client's (so [`crate::support::assert_same`] compares nginx's and sluice's tables).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use h2::client::{ResponseFuture, SendRequest};
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout};

use crate::support::{Reply, connect};

/// The longest a stream may take; longer is a test failure, not a hang.
const ANSWER_LIMIT: Duration = Duration::from_secs(30);

/// One HTTP/2 connection from `source`.
pub struct H2 {
    pub send: SendRequest<Bytes>,
    /// The connection's own task: how it ended (a GOAWAY with an error is an `Err`).
    pub conn: JoinHandle<Result<(), h2::Error>>,
    pub addr: SocketAddr,
    pub source: IpAddr,
    /// `http`, or `https` over TLS.
    scheme: &'static str,
}

/// A stream sent and not yet answered.
pub struct Pending {
    response: ResponseFuture,
    sent: Instant,
    source: IpAddr,
    path: String,
}

impl H2 {
    /// Connects from `source` and does the HTTP/2 handshake (preface, SETTINGS).
    pub async fn connect(addr: SocketAddr, source: IpAddr) -> H2 {
        let tcp = connect(addr, source).await;
        H2::over(tcp, addr, source, "http").await
    }

    /// Connects over TLS, trusting the CA certificate `ca` for `localhost`, with ALPN `h2`
    /// (which the server must choose).
    pub async fn connect_tls(addr: SocketAddr, source: IpAddr, ca: &std::path::Path) -> H2 {
        use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(ca).expect("the CA's PEM file") {
            roots
                .add(cert.expect("a CA certificate"))
                .expect("a usable CA");
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let tcp = connect(addr, source).await;
        let name = ServerName::try_from("localhost").expect("a name");
        let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
            .connect(name, tcp)
            .await
            .unwrap_or_else(|e| panic!("TLS handshake with {addr} failed: {e}"));
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]), "ALPN");
        H2::over(tls, addr, source, "https").await
    }

    async fn over<T>(io: T, addr: SocketAddr, source: IpAddr, scheme: &'static str) -> H2
    where
        T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (send, conn) = h2::client::handshake(io)
            .await
            .unwrap_or_else(|e| panic!("HTTP/2 handshake with {addr} failed: {e}"));
        H2 {
            send,
            conn: tokio::spawn(conn),
            addr,
            source,
            scheme,
        }
    }

    /// `GET path` as a request this connection can send (`:authority` is the server's address).
    pub fn get(&self, path: &str) -> http::request::Builder {
        http::Request::builder()
            .method("GET")
            .uri(format!("{}://{}{path}", self.scheme, self.addr))
    }

    /// Sends `req` (with `body`, its end, unless `more_body`) without waiting for the answer.
    pub async fn start(&mut self, req: http::Request<()>, body: Option<&[u8]>) -> Pending {
        let (pending, stream) = self.open(req, body.is_none()).await;
        if let (Some(b), Some(mut s)) = (body, stream) {
            s.send_data(Bytes::copy_from_slice(b), true)
                .expect("send the request body");
        }
        pending
    }

    /// Opens a stream: its HEADERS (`end` ends the stream there), and the stream to send a body
    /// on unless it ended.
    pub async fn open(
        &mut self,
        req: http::Request<()>,
        end: bool,
    ) -> (Pending, Option<h2::SendStream<Bytes>>) {
        let path = req.uri().path().to_owned();
        self.send = self
            .send
            .clone()
            .ready()
            .await
            .unwrap_or_else(|e| panic!("the connection to {} is not usable: {e}", self.addr));
        let sent = Instant::now();
        let (response, stream) = self
            .send
            .send_request(req, end)
            .unwrap_or_else(|e| panic!("cannot send a request to {}: {e}", self.addr));
        let pending = Pending {
            response,
            sent,
            source: self.source,
            path,
        };
        (pending, (!end).then_some(stream))
    }

    /// One `GET path`, answered.
    pub async fn fetch(&mut self, path: &str) -> Reply {
        let req = self.get(path).body(()).expect("a request");
        self.start(req, None).await.reply().await
    }

    /// How the server ended the connection (waits for it, at most `limit`; the client keeps
    /// it open meanwhile: an h2 client closes a connection it can no longer send on).
    pub async fn ended(self, limit: Duration) -> Result<(), h2::Error> {
        let H2 { send, conn, .. } = self;
        let ended = timeout(limit, conn).await;
        drop(send);
        match ended {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => panic!("the connection task failed: {e}"),
            Err(_) => panic!("the HTTP/2 connection was still open after {limit:?}"),
        }
    }
}

impl Pending {
    /// The answer, body included; a stream reset (or a connection gone) is status 0.
    pub async fn reply(self) -> Reply {
        let (sent, source, path) = (self.sent, self.source, self.path.clone());
        let got = timeout(ANSWER_LIMIT, async move {
            let resp = self.response.await?;
            let status = resp.status().as_u16();
            let headers = resp
                .headers()
                .iter()
                .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("?").to_owned()))
                .collect();
            let mut body = resp.into_body();
            let mut bytes = Vec::new();
            while let Some(chunk) = body.data().await {
                let chunk = chunk?;
                let _ = body.flow_control().release_capacity(chunk.len());
                bytes.extend_from_slice(&chunk);
            }
            Ok::<_, h2::Error>((status, headers, bytes))
        })
        .await
        .unwrap_or_else(|_| panic!("no answer to {path} within {ANSWER_LIMIT:?}"));
        let (status, headers, body) = got.unwrap_or_default();
        Reply {
            status,
            reason: String::new(),
            headers,
            body,
            elapsed: sent.elapsed(),
            source,
            path,
        }
    }

    /// Drops the stream unanswered: the client resets it (RST_STREAM CANCEL).
    pub fn cancel(self) {
        drop(self.response);
    }
}

/// The answers to `pending`, waited for together, sorted by latency.
pub async fn answers(pending: Vec<Pending>) -> Vec<Reply> {
    let tasks: Vec<_> = pending
        .into_iter()
        .map(|p| tokio::spawn(p.reply()))
        .collect();
    let mut replies = Vec::with_capacity(tasks.len());
    for t in tasks {
        match t.await {
            Ok(r) => replies.push(r),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("a stream's task failed: {e}"),
        }
    }
    replies.sort_by_key(|r| (r.elapsed, r.status));
    replies
}
