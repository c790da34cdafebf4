//! What a Unix tool is expected to ship, checked: the manual pages and shell completions that
//! `sluice` writes itself (from the same clap definition as `--help`, so they cannot drift), the
//! systemd unit (config/sluice.service, through `systemd-analyze verify` where it exists) and
//! the Dockerfile (config/Dockerfile: built where a Docker daemon answers, otherwise read).

use std::path::Path;
use std::process::{Command, Output};

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("run sluice")
}

fn stdout_of(args: &[&str]) -> String {
    let out = sluice(args);
    assert!(
        out.status.success(),
        "sluice {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

const COMMANDS: &[&str] = &[
    "run",
    "check",
    "reload",
    "reopen",
    "stop",
    "simulate",
    "import-nginx",
    "man",
    "completions",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn man_pages_cover_every_command() {
    let page = stdout_of(&["man"]);
    assert!(page.contains(".TH sluice 1"), "{page}");
    for c in COMMANDS {
        assert!(
            page.contains(&format!("sluice\\-{}(1)", c.replace('-', "\\-"))),
            "the main page does not list {c}:\n{page}"
        );
        let sub = stdout_of(&["man", c]);
        assert!(sub.contains(&format!(".TH sluice-{c} 1")), "{sub}");
    }
    let check = stdout_of(&["man", "check"]);
    assert!(check.contains("\\-\\-config"), "{check}");
    let unknown = sluice(&["man", "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    // Where man(1) is installed, the page must render.
    if let Ok(out) = Command::new("man")
        .args(["-l", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().expect("stdin").write_all(page.as_bytes())?;
            c.wait_with_output()
        })
    {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("nginx"),
            "man -l: {text}"
        );
    }
}

#[test]
fn completions_for_each_shell_name_every_command() {
    for (shell, marker) in [
        ("bash", "_sluice()"),
        ("zsh", "#compdef sluice"),
        ("fish", "complete -c sluice"),
    ] {
        let script = stdout_of(&["completions", shell]);
        assert!(script.contains(marker), "{shell}: no {marker}");
        for c in COMMANDS {
            assert!(script.contains(c), "{shell} completion lacks {c}");
        }
    }
    // bash is always here: the script must at least parse.
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("sluice.bash");
    std::fs::write(&file, stdout_of(&["completions", "bash"])).expect("write");
    let out = Command::new("bash")
        .arg("-n")
        .arg(&file)
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!sluice(&["completions", "tcsh"]).status.success());
}

#[test]
fn the_systemd_unit_verifies() {
    let unit = std::fs::read_to_string(root().join("config/sluice.service")).expect("the unit");
    for needed in [
        "[Unit]",
        "[Service]",
        "[Install]",
        "ExecStart=/usr/local/bin/sluice --config /etc/sluice/sluice.toml",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "KillSignal=SIGTERM",
    ] {
        assert!(
            unit.contains(needed),
            "config/sluice.service lacks {needed}"
        );
    }
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("systemd-analyze is not installed: the unit was read, not verified");
        return;
    }
    // The unit as it would be installed, pointing at this build and the example configuration.
    let dir = tempfile::tempdir().expect("a temp dir");
    let local = unit
        .replace("/usr/local/bin/sluice", env!("CARGO_BIN_EXE_sluice"))
        .replace(
            "/etc/sluice/sluice.toml",
            &root().join("config/sluice.toml").display().to_string(),
        );
    let file = dir.path().join("sluice.service");
    std::fs::write(&file, local).expect("write the unit");
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&file)
        .output()
        .expect("systemd-analyze");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // systemd-analyze exits 0 on a value it ignores; any line it writes is a finding.
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "systemd-analyze verify: {stderr}"
    );
}

#[test]
fn the_dockerfile_builds_or_reads_right() {
    let text = std::fs::read_to_string(root().join("config/Dockerfile")).expect("the Dockerfile");
    let instructions: Vec<(String, String)> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .fold(Vec::<String>::new(), |mut acc, l| {
            // Continuation lines belong to the instruction above.
            match acc.last_mut() {
                Some(prev) if prev.ends_with('\\') => {
                    prev.pop();
                    prev.push(' ');
                    prev.push_str(l);
                }
                _ => acc.push(l.to_owned()),
            }
            acc
        })
        .into_iter()
        .map(|l| {
            let (k, rest) = l.split_once(' ').unwrap_or((&l, ""));
            (k.to_ascii_uppercase(), rest.trim().to_owned())
        })
        .collect();
    const KNOWN: &[&str] = &[
        "FROM",
        "RUN",
        "COPY",
        "WORKDIR",
        "USER",
        "EXPOSE",
        "ENTRYPOINT",
        "CMD",
        "ENV",
        "ARG",
        "LABEL",
    ];
    assert_eq!(instructions[0].0, "FROM", "a Dockerfile starts with FROM");
    for (k, rest) in &instructions {
        assert!(
            KNOWN.contains(&k.as_str()),
            "unknown instruction {k} {rest}"
        );
        if k == "COPY" && !rest.starts_with("--from") {
            let parts: Vec<&str> = rest.split_whitespace().collect();
            for src in &parts[..parts.len() - 1] {
                assert!(
                    root().join(src).exists(),
                    "COPY {src}: no such path in the repository"
                );
            }
        }
    }
    let has = |k: &str, v: &str| instructions.iter().any(|(a, b)| a == k && b.contains(v));
    assert!(has("RUN", "cargo build --release --locked --bin sluice"));
    assert!(has(
        "COPY",
        "--from=build /src/target/release/sluice /usr/local/bin/sluice"
    ));
    assert!(has("ENTRYPOINT", "\"/usr/local/bin/sluice\""));
    assert!(has("USER", "nobody"));
    let daemon = Command::new("docker")
        .arg("info")
        .output()
        .is_ok_and(|o| o.status.success());
    if !daemon {
        eprintln!("no Docker daemon answers: config/Dockerfile was read, not built");
        return;
    }
    let out = Command::new("docker")
        .args([
            "build",
            "-q",
            "-f",
            "config/Dockerfile",
            "-t",
            "sluice-test",
            ".",
        ])
        .current_dir(root())
        .output()
        .expect("docker build");
    assert!(
        out.status.success(),
        "docker build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
