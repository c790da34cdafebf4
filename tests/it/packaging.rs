//! What a Unix tool is expected to ship, checked: the manual pages and shell completions that
//! `sluice` writes itself (from the same clap definition as `--help`, so they cannot drift), the
//! systemd unit (config/sluice.service: hardened, through `systemd-analyze verify` and `security`
//! where they exist), the Debian package (scripts/deb.sh, cargo-deb: unpacked into a scratch root,
//! its own binary checking its own configuration) and the Dockerfile (config/Dockerfile: built
//! where a Docker daemon answers, otherwise read: what it copies exists, it builds as the README
//! installs).

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

/// The lines a hardened unit must hold: its own user, `CAP_NET_BIND_SERVICE` only, a read-only
/// system, `sluice check` before start and before the reload's signal.
fn assert_hardened(unit: &str, bin: &str, what: &str) {
    let conf = "/etc/sluice/sluice.toml";
    for needed in [
        "[Unit]".to_owned(),
        "[Service]".to_owned(),
        "[Install]".to_owned(),
        format!("ExecStartPre={bin} check --config {conf}\n"),
        format!("ExecStart={bin} --config {conf}\n"),
        format!("ExecReload={bin} check --config {conf}\nExecReload=/bin/kill -HUP $MAINPID\n"),
        "KillSignal=SIGTERM".to_owned(),
        "DynamicUser=yes".to_owned(),
        "AmbientCapabilities=CAP_NET_BIND_SERVICE\n".to_owned(),
        "CapabilityBoundingSet=CAP_NET_BIND_SERVICE\n".to_owned(),
        "NoNewPrivileges=yes".to_owned(),
        "ProtectSystem=strict".to_owned(),
    ] {
        assert!(unit.contains(&needed), "{what} lacks {needed:?}:\n{unit}");
    }
    assert!(
        !unit.contains("\nUser="),
        "{what}: DynamicUser, not a fixed user"
    );
}

/// `systemd-analyze verify` on `unit` (its name: sluice.service), and its exposure by `systemd-analyze
/// security --offline`; false where systemd-analyze is not installed (scripts/test.sh installs it).
fn verify_unit(unit: &str) -> bool {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("systemd-analyze is not installed: the unit was read, not verified");
        return false;
    }
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("sluice.service");
    std::fs::write(&file, unit).expect("write the unit");
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
    // The exposure systemd itself computes, from 0 (locked down) to 10 ("OK" below 3), here at most 2.0.
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--no-pager", "--threshold=20"])
        .arg(&file)
        .output()
        .expect("systemd-analyze security");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "systemd-analyze security: exposure above 2.0 (1.7 when written):\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    true
}

#[test]
fn the_systemd_unit_is_hardened_and_verifies() {
    let unit = std::fs::read_to_string(root().join("config/sluice.service")).expect("the unit");
    assert_hardened(&unit, "/usr/local/bin/sluice", "config/sluice.service");
    // The unit as it would be installed, pointing at this build and the example configuration.
    let local = unit
        .replace("/usr/local/bin/sluice", env!("CARGO_BIN_EXE_sluice"))
        .replace(
            "/etc/sluice/sluice.toml",
            &root().join("config/sluice.toml").display().to_string(),
        );
    verify_unit(&local);
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
    // Built as the README installs it (`cargo install --locked --path .`; scripts/test.sh builds
    // with --locked too, so the lock file is current).
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    assert!(readme.contains("`cargo install --locked --path .`"));
    assert!(has(
        "RUN",
        "cargo install --locked --path . --root /usr/local"
    ));
    assert!(has(
        "COPY",
        "--from=build /usr/local/bin/sluice /usr/local/bin/sluice"
    ));
    assert!(has("COPY", "config/sluice.toml /etc/sluice/sluice.toml"));
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

/// A command's output, which must succeed.
fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The Debian package as scripts/deb.sh builds it (cargo-deb, from this build's binary), unpacked
/// into a scratch root with `dpkg-deb -x`: what it holds, the packaged `sluice check` on the
/// packaged configuration, the packaged unit verified.
#[test]
fn the_debian_package_unpacks_and_checks_its_configuration() {
    // cargo-deb takes the binary from the profile's directory: this build's.
    let exe = Path::new(env!("CARGO_BIN_EXE_sluice"));
    let profile = match exe
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
    {
        Some("debug") => "dev",
        Some(dir) => dir,
        None => panic!("no profile directory in {}", exe.display()),
    };
    let out = tempfile::tempdir().expect("a temp dir");
    run(Command::new(root().join("scripts/deb.sh"))
        .args(["--no-build", "--profile", profile])
        .arg(out.path()));
    let debs: Vec<_> = std::fs::read_dir(out.path())
        .expect("the output directory")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    assert_eq!(
        debs.len(),
        1,
        "one .deb in {}: {debs:?}",
        out.path().display()
    );
    let deb = &debs[0];
    let scratch = tempfile::tempdir().expect("a scratch root");
    let (tree, control) = (scratch.path().join("root"), scratch.path().join("DEBIAN"));
    run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&tree));
    run(Command::new("dpkg-deb").arg("-e").arg(deb).arg(&control));

    let fields = std::fs::read_to_string(control.join("control")).expect("control");
    assert!(fields.contains("Package: sluice\n"), "{fields}");
    assert!(fields.contains("Depends: libc6"), "{fields}");
    let conffiles = std::fs::read_to_string(control.join("conffiles")).expect("conffiles");
    assert_eq!(conffiles.trim(), "/etc/sluice/sluice.toml");
    // The unit enabled and started by the maintainer scripts cargo-deb writes.
    let postinst = std::fs::read_to_string(control.join("postinst")).expect("postinst");
    assert!(postinst.contains("deb-systemd-helper") && postinst.contains("sluice.service"));

    let conf = tree.join("etc/sluice/sluice.toml");
    assert_eq!(
        std::fs::read_to_string(&conf).expect("the packaged configuration"),
        std::fs::read_to_string(root().join("config/sluice.toml")).expect("config/sluice.toml")
    );
    let completions = [
        "usr/share/bash-completion/completions/sluice",
        "usr/share/zsh/vendor-completions/_sluice",
        "usr/share/fish/vendor_completions.d/sluice.fish",
    ];
    for file in completions {
        let text = std::fs::read_to_string(tree.join(file)).expect(file);
        assert!(text.contains("import-nginx"), "{file}");
    }
    for c in
        std::iter::once("sluice".to_owned()).chain(COMMANDS.iter().map(|c| format!("sluice-{c}")))
    {
        let gz = tree.join(format!("usr/share/man/man1/{c}.1.gz"));
        let page = run(Command::new("gzip").arg("-dc").arg(&gz));
        assert!(page.contains(&format!(".TH {c} 1")), "{}", gz.display());
    }

    // The packaged binary checks the packaged configuration.
    let bin = tree.join("usr/bin/sluice");
    let summary = run(Command::new(&bin).arg("check").arg("--config").arg(&conf));
    assert!(summary.contains("z_plain"), "{summary}");

    let unit_path = ["lib/systemd/system", "usr/lib/systemd/system"]
        .iter()
        .map(|d| tree.join(d).join("sluice.service"))
        .find(|p| p.exists())
        .expect("the unit in lib/systemd/system");
    let unit = std::fs::read_to_string(unit_path).expect("the unit");
    assert_hardened(&unit, "/usr/bin/sluice", "the packaged unit");
    assert!(!unit.contains("/usr/local"), "{unit}");
    verify_unit(
        &unit
            .replace("/usr/bin/sluice", &bin.display().to_string())
            .replace("/etc/sluice/sluice.toml", &conf.display().to_string()),
    );
}
