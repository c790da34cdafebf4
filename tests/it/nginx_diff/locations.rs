//! Location matching: each location's own limits, in nginx's lookup order.

use super::*;

/// nginx's lookup order with a limit per location, told apart by how many of seven
/// simultaneous nodelay requests pass (2r/s, each location its own zone, each path its own
/// client): `= /x` burst=1 (2 pass); `/x/y` is not `= /x` but `/` burst=5 (6); `^~ /static/`
/// burst=2 stops the regexes for `/static/a.php` (3); `~ \.php$` burst=3 beats the prefix
/// `/app/` for `/app/a.php` (4); `/app/` burst=4 for `/app/a.txt` (5); `~* \.JPG$` (no burst)
/// matches `/app/A.jpg` case-insensitively (1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_exact_prefix_and_regex_locations_pick_their_own_limits() {
    // (nginx location, zone, burst, request path, passes)
    let locations: [(&str, &str, u32, &str, usize); 6] = [
        ("= /x", "z_exact", 1, "/x", 2),
        ("/", "z_root", 5, "/x/y", 6),
        ("^~ /static/", "z_static", 2, "/static/a.php", 3),
        ("~ \\.php$", "z_php", 3, "/app/a.php", 4),
        ("/app/", "z_app", 4, "/app/a.txt", 5),
        ("~* \\.JPG$", "z_jpg", 0, "/app/A.jpg", 1),
    ];
    let burst = |b: u32, nginx: bool| match (b, nginx) {
        (0, _) => String::new(),
        (b, true) => format!(" burst={b} nodelay"),
        (b, false) => format!(", burst = {b}, nodelay = true"),
    };
    let pair = Pair::start(
        |up| {
            let zones: String = locations
                .iter()
                .map(|l| {
                    format!(
                        "  limit_req_zone $binary_remote_addr zone={}:1m rate=2r/s;\n",
                        l.1
                    )
                })
                .collect();
            let locs: String = locations
                .iter()
                .map(|(loc, z, b, _, _)| {
                    format!(
                        "    location {loc} {{ limit_req zone={z}{}; proxy_pass http://{up}; }}\n",
                        burst(*b, true)
                    )
                })
                .collect();
            format!(
                "{zones}  limit_req_status 429;
  server {{
{locs}  }}"
            )
        },
        |up| {
            let zones: String = locations.iter().map(|l| zone(l.1, "2r/s")).collect();
            let locs: String = locations
                .iter()
                .map(|(loc, z, b, _, _)| {
                    format!(
                        "[[servers.locations]]\npath      = '{loc}'\nlimit_req = {{ zone = \"{z}\"{} }}\n\n",
                        burst(*b, false)
                    )
                })
                .collect();
            format!(
                "limit_req_status = 429\n\n{zones}[[servers]]\nproxy_pass = \"http://{up}\"\n\n{locs}"
            )
        },
    );
    let mut requests = Vec::new();
    for _ in 0..7 {
        for (i, l) in locations.iter().enumerate() {
            let n = u8::try_from(i).expect("few locations") + 2;
            requests.push(Request::get(client(n), l.3));
        }
    }
    let (nginx, sluice) = pair.fire(requests).await;
    for (loc, _, _, path, passes) in &locations {
        let expected: Vec<(u16, u64)> = (0..7)
            .map(|i| (if i < *passes { 200 } else { 429 }, 0))
            .collect();
        check_group(
            &format!("{path} (location {loc})"),
            &on_paths(&nginx, &[path]),
            &on_paths(&sluice, &[path]),
            &expected,
        );
    }
    pair.assert_upstream_hits("location matching", &nginx, &sluice);
    pair.assert_same_limit_lines("location matching").await;
}
