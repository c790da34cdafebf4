//! `listen`'s flags, `server_name`, the servers sharing an address and
//! their certificates: what is accepted, and every mistake as
//! `FILE:LINE:COL`, all at once. (Reading the files is the file step's:
//! tests/it/tls.rs covers it on real certificates.)

use super::tests::{errors, ok};
use super::values::ServerName;

/// A `[[servers]]` table: `listen`, then `extra` lines, then a location.
fn server(listen: &str, extra: &str) -> String {
    format!(
        "[[servers]]\nlisten = \"{listen}\"\n{extra}\n[[servers.locations]]\npath = \"/\"\nreturn = {{ status = 200 }}\n"
    )
}

const CERT: &str = "ssl_certificate = \"a.crt\"\nssl_certificate_key = \"a.key\"";

#[test]
fn listen_flags_and_names_are_read() {
    let spec = ok(&[
        server("127.0.0.1:1 ssl http2", &format!("server_name = \"a.test *.a.test\"\n{CERT}")),
        server(
            "127.0.0.1:1 ssl default_server",
            &format!("server_name = \".b.test www.c.* ~^d\\\\d+$\"\n{CERT}\nssl_protocols = [\"TLSv1.3\"]\nhttp2 = false"),
        ),
        server("127.0.0.1:2", "server_name = \"plain.test\""),
    ]
    .concat());
    let [a, b, plain] = &spec.servers[..] else {
        panic!("three servers")
    };
    assert!(a.options.ssl && a.options.http2 && !a.options.default_server);
    assert!(b.options.ssl && !b.options.http2 && b.options.default_server);
    assert!(!plain.options.ssl);
    assert_eq!(a.server_name, "a.test");
    assert!(
        matches!(&a.names[..], [ServerName::Exact(e), ServerName::Front(f)] if e == "a.test" && f == ".a.test")
    );
    assert!(matches!(
        &b.names[..],
        [ServerName::Exact(e), ServerName::Front(f), ServerName::Back(w), ServerName::Regex(_)]
            if e == "b.test" && f == ".b.test" && w == "www.c."
    ));
    let tls = b.tls.as_ref().expect("b has a certificate");
    assert_eq!(tls.protocols, vec![crate::tls::Protocol::Tls13]);
    assert_eq!(tls.cert_file, std::path::Path::new("a.crt"));
    assert_eq!(b.http2, Some(false));
    assert_eq!(
        a.tls.as_ref().map(|t| t.protocols.clone()),
        Some(crate::tls::DEFAULT_PROTOCOLS.to_vec())
    );
    assert!(plain.tls.is_none());
}

#[test]
fn every_tls_mistake_is_reported_at_once() {
    let text = [
        // quic with TCP's flags.
        server("127.0.0.1:1 ssl quic", CERT),
        // a bad wildcard, a bad protocol.
        server(
            "127.0.0.1:2 ssl",
            &format!("server_name = \"a.*.test\"\n{CERT}\nssl_protocols = \"TLSv1.1 TLSv1.2\""),
        ),
        // a certificate without its key.
        server("127.0.0.1:3 ssl", "ssl_certificate = \"a.crt\""),
        // a certificate on a plain listen.
        server("127.0.0.1:4", CERT),
        // no certificate where another server says ssl.
        server(
            "127.0.0.1:5 ssl",
            &format!("server_name = \"x.test\"\n{CERT}"),
        ),
        server("127.0.0.1:5", "server_name = \"y.test\""),
        // two default servers, and a name twice.
        server(
            "127.0.0.1:6 default_server",
            "server_name = \"d.test e.test\"",
        ),
        server(
            "127.0.0.1:6 default_server",
            "server_name = \"f.test e.test\"",
        ),
        // a bad regex name.
        server("127.0.0.1:7", "server_name = \"~(\""),
    ]
    .concat();
    let e = errors(&text);
    let want = [
        "t.toml:2:10: \"quic\" goes alone with the address",
        "t.toml:10:15: invalid server name or wildcard \"a.*.test\"",
        "t.toml:13:17: \"TLSv1.1\" is not supported: sluice speaks TLSv1.2 and TLSv1.3",
        "t.toml:19:19: \"ssl_certificate\" needs \"ssl_certificate_key\"",
        "t.toml:25:19: \"ssl_certificate\" is set but the server does not listen with \"ssl\"",
        "t.toml:39:10: no \"ssl_certificate\" is defined for the server on 127.0.0.1:5",
        "t.toml:51:10: a duplicate default server for 127.0.0.1:6",
        "t.toml:52:15: conflicting server name \"e.test\" on 127.0.0.1:6",
        "t.toml:58:15: invalid server name regex",
    ];
    for w in want {
        assert!(e.iter().any(|l| l.starts_with(w)), "no {w:?} in {e:#?}");
    }
    assert_eq!(e.len(), want.len(), "{e:#?}");
}

/// A server with a `listen` list (written as TOML, not quoted).
fn listed(listens: &str, extra: &str) -> String {
    format!(
        "[[servers]]\nlisten = {listens}\n{extra}\n[[servers.locations]]\npath = \"/\"\nreturn = {{ status = 200 }}\n"
    )
}

#[test]
fn a_quic_listen_goes_beside_its_tcp_one() {
    let spec = ok(&[
        listed(
            "[\"127.0.0.1:1 ssl http2\", \"127.0.0.1:1 quic default_server\"]",
            &format!("{CERT}\nquic_retry = true"),
        ),
        listed("[\"127.0.0.1:2\"]", "http3 = false"),
    ]
    .concat());
    let [q, plain] = &spec.servers[..] else {
        panic!("two servers")
    };
    assert!(q.options.quic && q.options.ssl && q.options.http2 && q.options.default_server);
    assert!(q.quic_retry && q.http3);
    assert!(!plain.options.quic && !plain.quic_retry && !plain.http3);
    // ssl_early_data: off unless turned on, as nginx's.
    assert!(!q.ssl_early_data && !plain.ssl_early_data);
    let text = [
        // quic alone, without its TCP listen.
        listed("[\"127.0.0.1:1 quic\"]", CERT),
        // on another address than the TCP one.
        listed("[\"127.0.0.1:2 ssl\", \"127.0.0.1:3 quic\"]", CERT),
        // beside a plain TCP listen.
        listed("[\"127.0.0.1:4\", \"127.0.0.1:4 quic\"]", ""),
        // two TCP addresses.
        listed("[\"127.0.0.1:5\", \"127.0.0.1:6\"]", ""),
        // not a string.
        listed("[\"127.0.0.1:7 ssl\", 7]", CERT),
    ]
    .concat();
    let e = errors(&text);
    let want = [
        "t.toml:2:10: a \"quic\" listen needs its TCP listen with \"ssl\" beside it",
        "t.toml:9:10: the \"quic\" listen must be the TCP listen's address (127.0.0.1:2)",
        "t.toml:16:10: a \"quic\" listen needs the TCP listen to say \"ssl\"",
        "t.toml:22:10: a server listens on one TCP address",
        "t.toml:28:30: \"listen\" must be a string, found an integer",
    ];
    for w in want {
        assert!(e.iter().any(|l| l.starts_with(w)), "{w:?} in {e:#?}");
    }
}

#[test]
fn ssl_early_data_is_a_server_flag() {
    let spec = ok(&listed(
        "[\"127.0.0.1:1 ssl\", \"127.0.0.1:1 quic\"]",
        &format!("{CERT}\nssl_early_data = true"),
    ));
    assert!(spec.servers[0].ssl_early_data);
    let e = errors(&listed(
        "[\"127.0.0.1:1 ssl\", \"127.0.0.1:1 quic\"]",
        &format!("{CERT}\nssl_early_data = \"on\""),
    ));
    assert!(
        e.iter()
            .any(|l| l.starts_with("t.toml:5:18: \"ssl_early_data\" must be")),
        "{e:#?}"
    );
}
