//! The corpus case of `allow_list.conf`: `geo`, `map`, `allow` and `deny` imported, and the
//! import limiting as nginx does.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_allow_list() {
    let pair = import("allow_list", 1, &preamble(5, 18)).side_by_side();
    let xff = |ip: &str| get(1, "/v6").header("X-Forwarded-For", ip);
    pair.run(
        &Compare {
            show: &[],
            seen: &[],
        },
        vec![
            step(
                "allow-listed 127.0.0.2: never limited",
                get(2, "/a").times(4),
                "200=4",
            ),
            step("allow-listed 127.0.0.3", get(3, "/b").times(4), "200=4"),
            step(
                "127.0.0.4 is limited (burst=1)",
                get(4, "/c").times(4),
                "200=2 429=2",
            ),
            step(
                "2001:db8::5 (listed) through realip",
                xff("2001:db8::5").times(3),
                "200=3",
            ),
            step(
                "2001:db9::5 (not listed)",
                xff("2001:db9::5").times(3),
                "200=2 429=1",
            ),
            step(
                "10.1.2.3: its /16 was deleted, the /8 allows",
                xff("10.1.2.3").times(3),
                "200=3",
            ),
            step(
                "a bot from an allow-listed address: the bots' zone",
                get(2, "/bot")
                    .header("User-Agent", "Googlebot/2.1")
                    .times(3),
                "200=2 429=1",
            ),
            step(
                "writes from an allow-listed address: the writes' zone",
                get(3, "/w").method("DELETE").times(3),
                "200=2 429=1",
            ),
            step(
                "/admin/ from 127.0.0.2",
                get(2, "/admin/x").times(2),
                "200=2",
            ),
            step(
                "/admin/ from 127.0.0.5: denied",
                get(5, "/admin/x").times(2),
                "403=2",
            ),
            step(
                "/admin/ from 10.9.9.9 through realip",
                get(1, "/admin/y")
                    .header("X-Forwarded-For", "10.9.9.9")
                    .times(2),
                "200=2",
            ),
        ],
    )
    .await;
}
