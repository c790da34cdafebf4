//! `delay=` thresholds, the order of `nodelay` and `delay`, and which combinations nginx and
//! `sluice check` refuse.

use super::*;

/// 2r/s, seven simultaneous requests per location, each location its own zone and client:
/// - `/d1` burst=4 delay=1: 0, 0, 500, 1000, 1500, two rejected;
/// - `/d3` burst=4 delay=3: 0, 0, 0, 0, 500, two rejected;
/// - `/dbig` burst=2 delay=5 (delay > burst acts as nodelay): three at 0, four rejected;
/// - `/nd_b` `nodelay burst=3` (parameter order does not matter): four at 0, three rejected;
/// - `/d_b` `delay=2 burst=3`: 0, 0, 0, 500, three rejected;
/// - `/nb` `delay=2 nodelay` without burst (both given, the later wins, and neither changes
///   anything without burst): one at 0, six rejected.
///
/// nginx's `limit_req` takes at most three arguments, so `burst` together with both `nodelay`
/// and `delay=` is refused (see `diff_burst_with_both_nodelay_and_delay_is_refused`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_delay_thresholds_and_nodelay_order() {
    /// (path, zone, nginx parameters, sluice table, expected)
    type Case = (
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        Vec<(u16, u64)>,
    );
    let cases: [Case; 6] = [
        (
            "/d1",
            "z_d1",
            "burst=4 delay=1",
            "burst = 4, delay = 1",
            expect(&[(200, &[0, 0, 500, 1000, 1500]), (429, &[0; 2])]),
        ),
        (
            "/d3",
            "z_d3",
            "burst=4 delay=3",
            "burst = 4, delay = 3",
            expect(&[(200, &[0, 0, 0, 0, 500]), (429, &[0; 2])]),
        ),
        (
            "/dbig",
            "z_dbig",
            "burst=2 delay=5",
            "burst = 2, delay = 5",
            expect(&[(200, &[0; 3]), (429, &[0; 4])]),
        ),
        (
            "/nd_b",
            "z_nd_b",
            "nodelay burst=3",
            "nodelay = true, burst = 3",
            expect(&[(200, &[0; 4]), (429, &[0; 3])]),
        ),
        (
            "/d_b",
            "z_d_b",
            "delay=2 burst=3",
            "delay = 2, burst = 3",
            expect(&[(200, &[0, 0, 0, 500]), (429, &[0; 3])]),
        ),
        (
            "/nb",
            "z_nb",
            "delay=2 nodelay",
            "delay = 2, nodelay = true",
            expect(&[(200, &[0]), (429, &[0; 6])]),
        ),
    ];
    let nginx_zones: String = cases
        .iter()
        .map(|c| {
            format!(
                "  limit_req_zone $binary_remote_addr zone={}:1m rate=2r/s;\n",
                c.1
            )
        })
        .collect();
    let sluice_zones: String = cases.iter().map(|c| zone(c.1, "2r/s")).collect();
    let pair = Pair::start(
        |up| {
            let locations: String = cases
                .iter()
                .map(|(path, z, params, _, _)| {
                    format!(
                        "    location {path} {{ limit_req zone={z} {params}; proxy_pass http://{up}; }}\n"
                    )
                })
                .collect();
            format!(
                "{nginx_zones}  limit_req_status 429;
  server {{
{locations}  }}"
            )
        },
        |up| {
            let locations: String = cases
                .iter()
                .map(|(path, z, _, table, _)| {
                    format!(
                        "[[servers.locations]]\npath      = \"{path}\"\nlimit_req = {{ zone = \"{z}\", {table} }}\n\n"
                    )
                })
                .collect();
            format!(
                "limit_req_status = 429\n\n{sluice_zones}[[servers]]\nproxy_pass = \"http://{up}\"\n\n{locations}"
            )
        },
    );
    let mut requests = Vec::new();
    for _ in 0..7 {
        for (i, c) in cases.iter().enumerate() {
            let n = u8::try_from(i).expect("few cases") + 2;
            requests.push(Request::get(client(n), c.0));
        }
    }
    let (nginx, sluice) = pair.fire(requests).await;
    for (path, _, params, _, expected) in &cases {
        check_group(
            &format!("{path} ({params})"),
            &on_paths(&nginx, &[path]),
            &on_paths(&sluice, &[path]),
            expected,
        );
    }
    pair.assert_upstream_hits("delay thresholds", &nginx, &sluice);
    pair.assert_same_limit_lines("delay thresholds").await;
}

/// nginx 1.22.1 declares `limit_req` with one to three arguments (`NGX_CONF_TAKE123`), so
/// `limit_req zone=z burst=3 nodelay delay=2` (four) fails `nginx -t` with `invalid number of
/// arguments in "limit_req" directive`, whichever of nodelay/delay comes last. Without burst, both
/// fit (`zone=z nodelay delay=2`): nginx accepts that, and the later wins.
///
/// sluice refuses `{ zone = "z", burst = 3, nodelay = true, delay = 2 }` in the same way
/// (nginx-limit-req.md §1, "Both given: the later wins", holds only without burst).
#[test]
fn diff_burst_with_both_nodelay_and_delay_is_refused() {
    let dir = tempfile::Builder::new()
        .prefix("sluice-it-check-")
        .tempdir()
        .expect("temporary directory");
    let d = dir.path();
    fs::create_dir_all(d.join("conf")).expect("conf directory");
    fs::create_dir_all(d.join("logs")).expect("logs directory");
    // (nginx parameters, sluice table, nginx accepts)
    let cases = [
        (
            "burst=3 nodelay delay=2",
            "burst = 3, nodelay = true, delay = 2",
            false,
        ),
        (
            "burst=3 delay=2 nodelay",
            "burst = 3, delay = 2, nodelay = true",
            false,
        ),
        ("nodelay delay=2", "nodelay = true, delay = 2", true),
        ("burst=3 delay=2", "burst = 3, delay = 2", true),
    ];
    let mut problems = Vec::new();
    for (nginx_params, sluice_table, accepted) in cases {
        let conf = d.join("conf/nginx.conf");
        fs::write(
            &conf,
            format!(
                "events {{}}\nhttp {{\n  limit_req_zone $binary_remote_addr zone=z:1m rate=2r/s;\n  \
                 server {{ listen 127.0.0.1:1; location / {{ limit_req zone=z {nginx_params}; }} }}\n}}\n"
            ),
        )
        .expect("write nginx.conf");
        let nginx = Command::new(nginx_binary())
            .arg("-t")
            .arg("-p")
            .arg(format!("{}/", d.display()))
            .arg("-e")
            .arg(d.join("logs/error.log"))
            .arg("-c")
            .arg(&conf)
            .output()
            .expect("run nginx -t");
        let nginx_text = String::from_utf8_lossy(&nginx.stderr).into_owned();
        assert_eq!(
            nginx.status.success(),
            accepted,
            "nginx -t on `limit_req zone=z {nginx_params}` (oracle): {nginx_text}"
        );
        if !accepted {
            assert!(
                nginx_text.contains("invalid number of arguments in \"limit_req\" directive"),
                "nginx -t on `limit_req zone=z {nginx_params}` (oracle): {nginx_text}"
            );
        }
        let toml = d.join("sluice.toml");
        fs::write(
            &toml,
            format!(
                "{}[[servers]]\nlisten = \"127.0.0.1:1\"\nproxy_pass = \"http://127.0.0.1:2\"\n\n\
                 [[servers.locations]]\npath = \"/\"\nlimit_req = {{ zone = \"z\", {sluice_table} }}\n",
                zone("z", "2r/s")
            ),
        )
        .expect("write sluice.toml");
        let sluice = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("check")
            .arg("--config")
            .arg(&toml)
            .output()
            .expect("run sluice check");
        if sluice.status.success() != accepted {
            problems.push(format!(
                "nginx {} `limit_req zone=z {nginx_params}`, sluice check {} \
                 `limit_req = {{ zone = \"z\", {sluice_table} }}` ({}):\n{}{}",
                if accepted { "accepts" } else { "refuses" },
                if sluice.status.success() {
                    "accepts"
                } else {
                    "refuses"
                },
                sluice.status,
                String::from_utf8_lossy(&sluice.stdout),
                String::from_utf8_lossy(&sluice.stderr),
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "sluice and nginx disagree on which limit_req lines are valid:\n{}",
        problems.join("\n")
    );
}
