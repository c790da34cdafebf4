//! The tunnel on in-memory streams, in paused time: both directions, the
//! early bytes, half-close, the idle limit, a stalled client, a stop.

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, duplex};

const LIMITS: Limits = Limits {
    idle: Duration::from_secs(10),
    to_client: Duration::from_secs(4),
    to_upstream: Duration::from_secs(6),
};

/// A tunnel whose upstream side is the far end returned, with `early`
/// already read from it.
fn tunnel(early: &[u8], buffer: usize) -> (Box<Tunnel>, DuplexStream) {
    let (near, far) = duplex(buffer);
    let switched = Switched {
        io: Box::new(near),
        early: BytesMut::from(early),
    };
    (Box::new(Tunnel::new(switched, LIMITS, 1, Vec::new())), far)
}

async fn read_exact(s: &mut DuplexStream, n: usize) -> Vec<u8> {
    let mut buf = vec![0; n];
    s.read_exact(&mut buf)
        .await
        .expect("bytes through the tunnel");
    buf
}

#[tokio::test(start_paused = true)]
async fn bytes_pass_both_ways_early_ones_first_and_each_end_is_passed_on() {
    let (t, mut upstream) = tunnel(b"EARLY", 1024);
    let (mut client, mut user) = duplex(1024);
    let metrics = Arc::new(Metrics::new());
    let m = metrics.clone();
    let running = tokio::spawn(async move {
        let first = BytesMut::from(&b"FIRST"[..]);
        run(t, &mut client, first, &m, std::future::pending()).await;
    });
    assert_eq!(read_exact(&mut user, 5).await, b"EARLY");
    user.write_all(b"ping").await.unwrap();
    assert_eq!(read_exact(&mut upstream, 9).await, b"FIRSTping");
    upstream.write_all(b"pong").await.unwrap();
    assert_eq!(read_exact(&mut user, 4).await, b"pong");
    assert_eq!(metrics.tunnels(), 1);

    // The client stops writing: the upstream is told, and may still answer.
    user.shutdown().await.unwrap();
    assert_eq!(upstream.read(&mut [0; 8]).await.unwrap(), 0);
    tokio::time::sleep(Duration::from_secs(3)).await;
    upstream.write_all(b"late").await.unwrap();
    assert_eq!(read_exact(&mut user, 4).await, b"late");
    assert!(!running.is_finished());
    upstream.shutdown().await.unwrap();
    assert_eq!(user.read(&mut [0; 8]).await.unwrap(), 0);
    running.await.unwrap();
    assert_eq!(metrics.tunnels(), 0);
    let text = metrics.render(&config());
    assert!(
        text.contains("sluice_tunnel_bytes_total{direction=\"to_client\"} 13"),
        "{text}"
    );
    assert!(
        text.contains("sluice_tunnel_bytes_total{direction=\"to_upstream\"} 9"),
        "{text}"
    );
}

/// `proxy_read_timeout` is an idle limit for both directions together: a
/// tunnel the client keeps busy stays, a quiet one closes when it runs out.
#[tokio::test(start_paused = true)]
async fn the_idle_limit_counts_bytes_either_way() {
    let (t, mut upstream) = tunnel(b"", 1024);
    let (mut client, mut user) = duplex(1024);
    let metrics = Metrics::new();
    let start = Instant::now();
    let joined = async {
        let io: &mut dyn Duplex = &mut *upstream_io(t);
        let (mut up, mut down) = (
            Pipe::new(BytesMut::new(), LIMITS.to_upstream),
            Pipe::new(BytesMut::new(), LIMITS.to_client),
        );
        join(
            &mut client,
            io,
            (&mut up, &mut down),
            LIMITS.idle,
            &metrics,
            std::future::pending(),
        )
        .await
    };
    let talking = async {
        // Only the client speaks, every 6 s, for 30 s.
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_secs(6)).await;
            user.write_all(b"x").await.unwrap();
            assert_eq!(read_exact(&mut upstream, 1).await, b"x");
        }
        std::future::pending::<()>().await
    };
    let end = tokio::select! {
        end = joined => end,
        () = talking => unreachable!(),
    };
    assert!(matches!(end, End::Idle), "{end:?}");
    assert_eq!(start.elapsed(), Duration::from_secs(30 + 10));
}

/// The upstream side of a tunnel, for [`join`] alone.
fn upstream_io(mut t: Box<Tunnel>) -> Box<dyn Duplex> {
    let (placeholder, _) = duplex(1);
    std::mem::replace(&mut t.upstream.io, Box::new(placeholder))
}

/// A client that takes nothing closes the tunnel at `send_timeout`, and a
/// stop ends one at once.
#[tokio::test(start_paused = true)]
async fn a_stalled_client_or_a_stop_ends_it() {
    let (t, mut upstream) = tunnel(b"", 1024);
    let (mut client, _user) = duplex(64);
    let metrics = Metrics::new();
    let io: &mut dyn Duplex = &mut *upstream_io(t);
    let start = Instant::now();
    upstream.write_all(&[7; 512]).await.unwrap();
    let (mut up, mut down) = (
        Pipe::new(BytesMut::new(), LIMITS.to_upstream),
        Pipe::new(BytesMut::new(), LIMITS.to_client),
    );
    let end = join(
        &mut client,
        io,
        (&mut up, &mut down),
        LIMITS.idle,
        &metrics,
        std::future::pending(),
    )
    .await;
    assert!(
        matches!(end, End::Failed(Side::Client, Failure::Stalled)),
        "{end:?}"
    );
    assert_eq!(start.elapsed(), LIMITS.to_client);
    assert_eq!(down.bytes, 64);

    let (t, _upstream) = tunnel(b"", 1024);
    let (mut client, _user) = duplex(64);
    let io: &mut dyn Duplex = &mut *upstream_io(t);
    let start = Instant::now();
    let stop = tokio::time::sleep(Duration::from_secs(2));
    let (mut up, mut down) = (
        Pipe::new(BytesMut::new(), LIMITS.to_upstream),
        Pipe::new(BytesMut::new(), LIMITS.to_client),
    );
    let end = join(
        &mut client,
        io,
        (&mut up, &mut down),
        LIMITS.idle,
        &metrics,
        stop,
    )
    .await;
    assert!(matches!(end, End::Stopped), "{end:?}");
    assert_eq!(start.elapsed(), Duration::from_secs(2));
}

/// A configuration to render metrics with.
fn config() -> crate::config::Config {
    let toml = "[[servers]]\nlisten = \"127.0.0.1:1\"\n[[servers.locations]]\npath = \"/\"\nreturn = { status = 200 }\n";
    let spec = crate::config::parse_str("t.toml", toml).expect("a valid configuration");
    crate::config::Config::compile(spec, None).expect("it compiles")
}
