//! `sluice simulate`, run as a user runs it: the real binary, its output
//! read back (the table's cells, the JSON parsed, the SVG's lanes).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

fn simulate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("simulate")
        .args(args)
        .output()
        .expect("run sluice simulate")
}

fn stdout_of(args: &[&str]) -> String {
    let out = simulate(args);
    assert!(out.status.success(), "sluice simulate {args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The table's rows: name → its cells after the name.
fn rows(table: &str) -> BTreeMap<String, Vec<String>> {
    table
        .lines()
        .filter_map(|l| {
            let mut cells = l.split_whitespace().map(str::to_string);
            let name = cells.next()?;
            let rest: Vec<String> = cells.collect();
            // A row is a name and numbers; the title, header and notes
            // are not.
            let named = name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
            let numeric = rest.first()?.bytes().all(|b| b.is_ascii_digit());
            (named && numeric).then_some((name, rest))
        })
        .collect()
}

/// (allowed, most in any window) per row.
fn allowed_and_most(table: &str) -> Vec<(String, u64, u64)> {
    let order = [
        "fixed_window",
        "sliding_log",
        "sliding_window",
        "token_bucket",
        "leaky_queue",
        "gcra",
    ];
    let rows = rows(table);
    order
        .iter()
        .map(|name| {
            let cells = rows
                .get(*name)
                .unwrap_or_else(|| panic!("no {name} in\n{table}"));
            (
                name.to_string(),
                cells[0].parse().unwrap(),
                cells[2].parse().unwrap(),
            )
        })
        .collect()
}

fn expected(rows: [(&str, u64, u64); 6]) -> Vec<(String, u64, u64)> {
    rows.iter()
        .map(|&(n, a, m)| (n.to_string(), a, m))
        .collect()
}

#[test]
fn scenario_a_prints_the_articles_row() {
    let table = stdout_of(&["--scenario", "A"]);
    assert!(
        table.starts_with("scenario A: 20 requests, rate 10r/10s, burst 9\n"),
        "{table}"
    );
    assert_eq!(
        allowed_and_most(&table),
        expected([
            ("fixed_window", 20, 20),
            ("sliding_log", 10, 10),
            ("sliding_window", 11, 11),
            ("token_bucket", 10, 10),
            ("leaky_queue", 11, 11),
            ("gcra", 10, 10),
        ])
    );
    assert!(rows(&table).contains_key("leaky_bucket"));
    assert!(
        table.contains(
            "decide 1 request differently:\n  #11 at 10.1s: admitted by leaky_queue only"
        ),
        "{table}"
    );
}

#[test]
fn scenario_b_prints_the_articles_row() {
    let table = stdout_of(&["--scenario", "B"]);
    assert_eq!(
        allowed_and_most(&table),
        expected([
            ("fixed_window", 20, 19),
            ("sliding_log", 20, 10),
            ("sliding_window", 20, 10),
            ("token_bucket", 29, 19),
            ("leaky_queue", 30, 20),
            ("gcra", 29, 19),
        ])
    );
    // The queue: processed 10 in any 10 s, longest wait 10 s.
    let queue = &rows(&table)["leaky_queue"];
    assert_eq!(queue[3..], ["10", "10s"]);
    assert_eq!(rows(&table)["token_bucket"][3..], ["-", "-"]);
}

#[test]
fn json_has_every_decision() {
    let text = stdout_of(&["--scenario", "B", "--format", "json"]);
    let doc = json::parse(&text);
    assert_eq!(doc.get("requests").num(), 46);
    let algs = doc.get("algorithms").list();
    let names: Vec<&str> = algs.iter().map(|a| a.get("name").str()).collect();
    assert_eq!(
        names,
        [
            "fixed_window",
            "sliding_log",
            "sliding_window",
            "token_bucket",
            "leaky_queue",
            "gcra",
            "leaky_bucket"
        ]
    );
    let by_name = |n: &str| algs.iter().find(|a| a.get("name").str() == n).unwrap();
    for a in algs {
        let decisions: Vec<bool> = a.get("decisions").list().iter().map(|d| d.bool()).collect();
        assert_eq!(decisions.len(), 46);
        let admitted = decisions.iter().filter(|&&d| d).count() as u64;
        assert_eq!(a.get("allowed").num(), admitted);
        let queueing = ["leaky_queue", "leaky_bucket"].contains(&a.get("name").str());
        assert_eq!(
            a.find("max_wait_ms").is_some(),
            queueing,
            "{}",
            a.get("name").str()
        );
    }
    let q = by_name("leaky_queue");
    assert_eq!(q.get("allowed").num(), 30);
    assert_eq!(q.get("max_in_window").num(), 20);
    assert_eq!(q.get("max_wait_ms").num(), 10_000);
    assert_eq!(q.get("max_processed_in_window").num(), 10);
    assert_eq!(by_name("sliding_log").get("max_in_window").num(), 10);
    // The first 16 arrive at twice the rate: the sliding log admits 10.
    let log: Vec<bool> = by_name("sliding_log")
        .get("decisions")
        .list()
        .iter()
        .map(|d| d.bool())
        .collect();
    assert_eq!(log[..16], [[true; 10].as_slice(), &[false; 6]].concat());
    assert_eq!(
        by_name("token_bucket").get("decisions"),
        by_name("gcra").get("decisions")
    );
}

fn write_trace(dir: &Path, text: &str) -> String {
    let path = dir.join("trace.txt");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn a_trace_with_two_keys_limits_each_apart() {
    let dir = tempfile::tempdir().unwrap();
    // 12 from each of two clients at 1.5 s, interleaved, with comments.
    let mut text = String::from("# two clients, each bursting 12 at once\n\n");
    for _ in 0..12 {
        text.push_str("1.5 alice\n1.500 bob   # the same instant\n");
    }
    let file = write_trace(dir.path(), &text);
    let args = [
        "--trace",
        &file,
        "--algorithm",
        "token_bucket",
        "--algorithm",
        "sliding_log",
    ];
    let table = stdout_of(&args);
    assert!(
        table.starts_with(&format!(
            "{file}: 24 requests from 2 keys, rate 10r/10s, burst 9\n"
        )),
        "{table}"
    );
    let rows = rows(&table);
    assert_eq!(rows.len(), 2, "{table}");
    for name in ["token_bucket", "sliding_log"] {
        // allowed, rejected, busiest key in any 10 s, all keys in any 10 s
        assert_eq!(rows[name][..4], ["20", "4", "10", "20"], "{table}");
    }
    // In input order: each client's 11th and 12th are refused.
    let json_args = [&args[..], &["--format", "json"]].concat();
    let doc = json::parse(&stdout_of(&json_args));
    assert_eq!(doc.get("keys").num(), 2);
    let d: Vec<bool> = doc.get("algorithms").list()[0]
        .get("decisions")
        .list()
        .iter()
        .map(|d| d.bool())
        .collect();
    assert_eq!(d[..20], [true; 20]);
    assert_eq!(d[20..], [false; 4]);
}

#[test]
fn the_plot_is_an_svg_with_a_lane_per_algorithm() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("b.svg");
    let table = stdout_of(&["--scenario", "B", "--plot", &svg.display().to_string()]);
    assert!(table.contains("token_bucket"));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
        "{}",
        &text[..80]
    );
    assert!(text.trim_end().ends_with("</svg>"));
    assert_eq!(text.matches("<g").count(), text.matches("</g>").count());
    let lanes: Vec<&str> = text
        .match_indices("<g class=\"lane\" data-algorithm=\"")
        .map(|(i, m)| {
            let rest = &text[i + m.len()..];
            &rest[..rest.find('"').unwrap()]
        })
        .collect();
    assert_eq!(
        lanes,
        [
            "fixed_window",
            "sliding_log",
            "sliding_window",
            "token_bucket",
            "leaky_queue",
            "gcra",
            "leaky_bucket"
        ]
    );
    // Each lane is labelled with its name, and draws all 46 requests.
    for lane in text.split("<g class=\"lane\"").skip(1) {
        let name = &lane[lane.find("data-algorithm=\"").unwrap() + 16..];
        let name = &name[..name.find('"').unwrap()];
        assert!(lane.contains(&format!(">{name}</text>")));
        let marks =
            lane.matches("class=\"admitted\"").count() + lane.matches("class=\"rejected\"").count();
        assert_eq!(marks, 46, "{name}");
    }
    // Only the rows asked for.
    let one = dir.path().join("one.svg");
    stdout_of(&[
        "--scenario",
        "A",
        "--algorithm",
        "gcra",
        "--plot",
        &one.display().to_string(),
    ]);
    let text = std::fs::read_to_string(&one).unwrap();
    assert_eq!(text.matches("class=\"lane\"").count(), 1);
}

#[test]
fn a_bad_trace_line_is_named_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_trace(dir.path(), "# ok so far\n1.5 alice\n9,9 bob\n");
    let out = simulate(&["--trace", &file]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(&format!("{file}:3: invalid time \"9,9\"")),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    let file = write_trace(dir.path(), "1.0005\n");
    let err = String::from_utf8_lossy(&simulate(&["--trace", &file]).stderr).to_string();
    assert!(
        err.starts_with(&format!(
            "{file}:1: time \"1.0005\" has more than 3 decimals"
        )),
        "{err}"
    );
}

#[test]
fn bad_arguments_exit_2() {
    for args in [
        &["--scenario", "C"][..],
        &["--scenario", "A", "--algorithm", "leaky"],
        &["--scenario", "A", "--rate", "10r/x"],
        &["--scenario", "A", "--burst", "-1"],
        &[],
    ] {
        let out = simulate(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(!out.stderr.is_empty());
    }
}

/// Just enough JSON to read the output back (no serde_json in the crate).
mod json {
    #[derive(Debug, PartialEq)]
    pub enum Value {
        Null,
        Bool(bool),
        Num(String),
        Str(String),
        List(Vec<Value>),
        Object(Vec<(String, Value)>),
    }

    impl Value {
        pub fn find(&self, key: &str) -> Option<&Value> {
            match self {
                Value::Object(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
                _ => None,
            }
        }
        pub fn get(&self, key: &str) -> &Value {
            self.find(key)
                .unwrap_or_else(|| panic!("no \"{key}\" in {self:?}"))
        }
        pub fn num(&self) -> u64 {
            match self {
                Value::Num(n) => n.parse().unwrap(),
                v => panic!("not a number: {v:?}"),
            }
        }
        pub fn str(&self) -> &str {
            match self {
                Value::Str(s) => s,
                v => panic!("not a string: {v:?}"),
            }
        }
        pub fn bool(&self) -> bool {
            match self {
                Value::Bool(b) => *b,
                v => panic!("not a boolean: {v:?}"),
            }
        }
        pub fn list(&self) -> &[Value] {
            match self {
                Value::List(l) => l,
                v => panic!("not a list: {v:?}"),
            }
        }
    }

    /// The whole text must be one value (whitespace around it allowed).
    pub fn parse(text: &str) -> Value {
        let mut p = Parser {
            s: text.as_bytes(),
            i: 0,
        };
        let v = p.value();
        p.ws();
        assert_eq!(p.i, p.s.len(), "trailing text after the JSON value");
        v
    }

    struct Parser<'a> {
        s: &'a [u8],
        i: usize,
    }

    impl Parser<'_> {
        fn ws(&mut self) {
            while self.i < self.s.len() && b" \t\r\n".contains(&self.s[self.i]) {
                self.i += 1;
            }
        }
        fn eat(&mut self, b: u8) {
            self.ws();
            assert_eq!(
                self.s.get(self.i),
                Some(&b),
                "expected {:?} at {}",
                b as char,
                self.i
            );
            self.i += 1;
        }
        fn peek(&mut self) -> u8 {
            self.ws();
            *self.s.get(self.i).expect("unexpected end of JSON")
        }
        fn value(&mut self) -> Value {
            match self.peek() {
                b'{' => self.object(),
                b'[' => self.list(),
                b'"' => Value::Str(self.string()),
                b't' | b'f' | b'n' => self.word(),
                _ => self.number(),
            }
        }
        fn object(&mut self) -> Value {
            self.eat(b'{');
            let mut fields = Vec::new();
            if self.peek() != b'}' {
                loop {
                    let k = self.string();
                    self.eat(b':');
                    fields.push((k, self.value()));
                    if self.peek() == b',' {
                        self.eat(b',');
                    } else {
                        break;
                    }
                }
            }
            self.eat(b'}');
            Value::Object(fields)
        }
        fn list(&mut self) -> Value {
            self.eat(b'[');
            let mut items = Vec::new();
            if self.peek() != b']' {
                loop {
                    items.push(self.value());
                    if self.peek() == b',' {
                        self.eat(b',');
                    } else {
                        break;
                    }
                }
            }
            self.eat(b']');
            Value::List(items)
        }
        fn string(&mut self) -> String {
            self.eat(b'"');
            let mut out = Vec::new();
            loop {
                let c = self.s[self.i];
                self.i += 1;
                match c {
                    b'"' => return String::from_utf8(out).expect("UTF-8 in a JSON string"),
                    b'\\' => {
                        let e = self.s[self.i];
                        self.i += 1;
                        out.push(match e {
                            b'n' => b'\n',
                            b't' => b'\t',
                            b'r' => b'\r',
                            b'"' | b'\\' | b'/' => e,
                            _ => panic!("escape \\{} not expected here", e as char),
                        });
                    }
                    c => {
                        assert!(c >= 0x20, "raw control character in a string");
                        out.push(c);
                    }
                }
            }
        }
        fn word(&mut self) -> Value {
            for (w, v) in [
                ("true", Value::Bool(true)),
                ("false", Value::Bool(false)),
                ("null", Value::Null),
            ] {
                if self.s[self.i..].starts_with(w.as_bytes()) {
                    self.i += w.len();
                    return v;
                }
            }
            panic!("unexpected word at {}", self.i);
        }
        fn number(&mut self) -> Value {
            let start = self.i;
            while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
                self.i += 1;
            }
            assert!(self.i > start, "expected a value at {start}");
            Value::Num(String::from_utf8_lossy(&self.s[start..self.i]).to_string())
        }
    }
}
