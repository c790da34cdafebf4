//! The bodies of the fuzz targets in `fuzz/` (`scripts/fuzz.sh` runs them).
//!
//! Why the checks live here and not in `fuzz/fuzz_targets/`: the fuzz
//! crate builds only on nightly with cargo-fuzz, but the committed corpora
//! must also be replayed by `scripts/test.sh` on stable. Each target is one
//! function of bytes that panics on a finding; `fuzz/fuzz_targets/NAME.rs`
//! calls it, and the tests at the bottom run every file of
//! `fuzz/corpus/NAME/` (and the crash reproducers in `fuzz/regressions/NAME/`)
//! through the same function. The module is compiled only for tests and with
//! the `fuzzing` feature (which the fuzz crate turns on), so it is no part of
//! the proxy's API.
//!
//! An error is never a finding (most inputs are garbage); a panic is, and
//! so is a broken invariant, asserted with `assert!` so that libFuzzer
//! records the input.//!
//! One file per target: `config`, `upstream`, `http1`, `h1loop`, `http2`, `http3`, `h2upstream`,
//! `limiter`, `algorithms`, `proxy_protocol`, each
//! opening with what its input is and what it checks; this file holds
//! what they share (the input [`Reader`], the [`pieces`] a connection
//! might receive) and the corpus replay.

mod algorithms;
mod config;
mod h1loop;
mod h2upstream;
mod http1;
mod http2;
mod http3;
mod limiter;
mod proxy_protocol;
mod upstream;

pub use algorithms::algorithms;
pub use config::config;
pub use h1loop::h1loop;
pub use h2upstream::h2upstream;
pub use http1::http1;
pub use http2::http2;
pub use http3::http3;
pub use limiter::limiter;
pub use proxy_protocol::proxy_protocol;
pub use upstream::upstream;

/// A target: bytes in, a panic on a finding.
pub type Target = fn(&[u8]);

/// Every target, by the name of its `fuzz/fuzz_targets/NAME.rs` and corpus
/// directory.
pub const TARGETS: &[(&str, Target)] = &[
    ("config", config),
    ("upstream", upstream),
    ("limiter", limiter),
    ("http1", http1),
    ("http2", http2),
    ("http3", http3),
    ("h2upstream", h2upstream),
    ("h1loop", h1loop),
    ("algorithms", algorithms),
    ("proxy_protocol", proxy_protocol),
];

/// Reads the structured part of an input: numbers off the front, zeros
/// once it runs out (so every input decodes to something).
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `len` bytes cut into pieces of 1 to `most` bytes, their sizes drawn
/// from `seed` (xorshift): how a connection might receive them.
fn pieces(seed: u8, len: usize, most: u32) -> Vec<usize> {
    let mut pieces = Vec::new();
    let mut state = u32::from(seed) | 1;
    let mut left = len;
    while left > 0 {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let n = (1 + (state % most) as usize).min(left);
        pieces.push(n);
        left -= n;
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Every file under `dir` through `target`; the number run.
    fn replay(dir: &Path, target: Target) -> usize {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        let mut n = 0;
        let mut paths: Vec<_> = entries
            .map(|e| e.expect("a readable directory entry").path())
            .collect();
        paths.sort();
        for p in paths {
            let data = std::fs::read(&p).expect("a readable corpus file");
            if std::panic::catch_unwind(|| target(&data)).is_err() {
                panic!("{} fails its target", p.display());
            }
            n += 1;
        }
        n
    }

    /// The committed corpora (`cargo fuzz cmin`-minimised) and crash
    /// reproducers, on stable: what the fuzzers found interesting still
    /// passes, and what they found broken stays fixed.
    #[test]
    fn fuzz_corpora_replay() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
        for (name, target) in TARGETS {
            let corpus = replay(&root.join("corpus").join(name), *target);
            let regressions = replay(&root.join("regressions").join(name), *target);
            eprintln!("fuzz target {name}: {corpus} corpus files, {regressions} regressions");
            assert!(corpus > 0, "fuzz/corpus/{name} is empty or missing");
        }
    }
}
