//! A chunked request body, checked with nginx's grammar
//! (`ngx_http_parse_chunked`) and re-framed canonically.
//!
//! nginx accepts: hex sizes (at most 2^63 - 1), a size line ended by LF or
//! CR LF, extensions after `;`, space or tab (their content is not looked
//! at), data followed by LF or CR LF, and trailer lines after the last chunk.
//! Anything else — a non-hex size, a CR not followed by LF, an overflow, no
//! line end after the data — is an invalid body (400). nginx forwards
//! neither extensions nor trailers; the canonical form hyper reads is
//! `SIZE CRLF data CRLF … 0 CRLF CRLF`, so that hyper ends the body exactly
//! where this reader does.

use bytes::BufMut;
use std::fmt;

/// Why a chunked body is invalid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkError;

impl fmt::Display for ChunkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("client sent invalid chunked body")
    }
}

impl std::error::Error for ChunkError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Start,
    Size,
    Extension,
    ExtensionLf,
    Data,
    AfterData,
    AfterDataLf,
    LastExtension,
    LastExtensionLf,
    Trailer,
    TrailerLf,
    TrailerHeader,
    TrailerHeaderLf,
    Done,
}

/// The reader of one chunked body, fed its bytes as they arrive.
#[derive(Clone, Debug)]
pub struct Chunked {
    state: State,
    /// Size of the chunk being read; in [`State::Data`], what is left of it.
    size: u64,
    /// The sizes of the chunks announced so far, added up (nginx refuses a
    /// body whose announced size passes `client_max_body_size` at once).
    declared: u64,
    /// The output is the body re-framed canonically (for hyper), not only
    /// its data (for sluice's own server loop).
    framed: bool,
}

impl Default for Chunked {
    fn default() -> Self {
        Chunked::new()
    }
}

impl Chunked {
    pub fn new() -> Chunked {
        Chunked {
            state: State::Start,
            size: 0,
            declared: 0,
            framed: true,
        }
    }

    /// A reader whose output is the body's data alone, without framing.
    pub fn decoding() -> Chunked {
        Chunked {
            framed: false,
            ..Chunked::new()
        }
    }

    /// The body's size as its chunk size lines announced it so far.
    pub fn declared(&self) -> u64 {
        self.declared
    }

    /// The last chunk and the trailer have been read.
    pub fn done(&self) -> bool {
        self.state == State::Done
    }

    /// Checks `data`; returns how many bytes belong to the body (after
    /// [`Chunked::done`], none: what follows is the next request).
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn feed(&mut self, data: &[u8]) -> Result<usize, ChunkError> {
        self.feed_into::<Vec<u8>>(data, None)
    }

    /// As [`Chunked::feed`], appending the canonical framing of what was read
    /// to `out`.
    pub fn feed_into<O: BufMut>(
        &mut self,
        data: &[u8],
        mut out: Option<&mut O>,
    ) -> Result<usize, ChunkError> {
        let mut i = 0;
        // Decoding: one chunk's data at a time, as hyper gave it (each
        // chunk a frame of its own), but the framing after it read on, so
        // that an error there comes before the data, as it did.
        let mut one_chunk = false;
        while i < data.len() {
            match self.state {
                State::Done => break,
                State::Data if one_chunk => break,
                State::Data => {
                    i += self.data(&data[i..], &mut out);
                    one_chunk = !self.framed && self.state == State::AfterData;
                    continue;
                }
                _ => self.state = self.step(data[i], &mut out)?,
            }
            i += 1;
        }
        Ok(i)
    }

    /// The framing, one byte `b` at a time: the state after it. Every state
    /// but [`State::Data`] (which takes many bytes at once) and
    /// [`State::Done`] (which takes none) reads a byte here.
    fn step<O: BufMut>(&mut self, b: u8, out: &mut Option<&mut O>) -> Result<State, ChunkError> {
        use State::*;
        Ok(match self.state {
            Start => {
                self.size = u64::from(hex(b).ok_or(ChunkError)?);
                Size
            }
            Size => self.size_byte(b, out)?,
            Extension => match b {
                b'\r' => ExtensionLf,
                b'\n' => self.begin_data(out),
                _ => Extension,
            },
            ExtensionLf => {
                lf(b)?;
                self.begin_data(out)
            }
            AfterData => match b {
                b'\r' => AfterDataLf,
                b'\n' => Start,
                _ => return Err(ChunkError),
            },
            AfterDataLf => {
                lf(b)?;
                Start
            }
            LastExtension => match b {
                b'\r' => LastExtensionLf,
                b'\n' => Trailer,
                _ => LastExtension,
            },
            LastExtensionLf => {
                lf(b)?;
                Trailer
            }
            Trailer => match b {
                b'\r' => TrailerLf,
                b'\n' => self.finish(out),
                _ => TrailerHeader,
            },
            TrailerLf => {
                lf(b)?;
                self.finish(out)
            }
            TrailerHeader => match b {
                b'\r' => TrailerHeaderLf,
                b'\n' => Trailer,
                _ => TrailerHeader,
            },
            TrailerHeaderLf => {
                lf(b)?;
                Trailer
            }
            // Read by `feed_into` itself, never a byte at a time.
            Data | Done => self.state,
        })
    }

    /// A byte of the size line after its first digit: another hex digit, or
    /// what ends the size (an extension, the line's end); the last chunk
    /// (size 0) goes on to the trailer instead of data.
    fn size_byte<O: BufMut>(
        &mut self,
        b: u8,
        out: &mut Option<&mut O>,
    ) -> Result<State, ChunkError> {
        use State::*;
        /// nginx refuses a size above `NGX_MAX_OFF_T_VALUE / 16` before
        /// taking another digit.
        const MAX: u64 = i64::MAX as u64;
        if self.size > MAX / 16 {
            return Err(ChunkError);
        }
        if let Some(d) = hex(b) {
            self.size = self.size * 16 + u64::from(d);
            return Ok(Size);
        }
        let last = self.size == 0;
        Ok(match (b, last) {
            (b'\r', false) => ExtensionLf,
            (b'\n', false) => self.begin_data(out),
            (b';' | b' ' | b'\t', false) => Extension,
            (b'\r', true) => LastExtensionLf,
            (b'\n', true) => Trailer,
            (b';' | b' ' | b'\t', true) => LastExtension,
            _ => return Err(ChunkError),
        })
    }

    /// A chunk's data, as much of it as `data` holds: copied to `out`, with
    /// the canonical CRLF once the chunk is whole. Returns the bytes taken.
    fn data<O: BufMut>(&mut self, data: &[u8], out: &mut Option<&mut O>) -> usize {
        let n = data
            .len()
            .min(usize::try_from(self.size).unwrap_or(usize::MAX));
        if let Some(o) = out.as_deref_mut() {
            o.put_slice(&data[..n]);
        }
        self.size -= n as u64;
        if self.size == 0 {
            self.state = State::AfterData;
            if let Some(o) = out.as_deref_mut().filter(|_| self.framed) {
                o.put_slice(b"\r\n");
            }
        }
        n
    }

    /// A chunk's size line ended: its canonical size line.
    fn begin_data<O: BufMut>(&mut self, out: &mut Option<&mut O>) -> State {
        self.declared = self.declared.saturating_add(self.size);
        if let Some(o) = out.as_deref_mut().filter(|_| self.framed) {
            push_hex(o, self.size);
            o.put_slice(b"\r\n");
        }
        State::Data
    }

    /// The trailer's empty line: the body is done; its canonical last
    /// chunk.
    fn finish<O: BufMut>(&mut self, out: &mut Option<&mut O>) -> State {
        if let Some(o) = out.as_deref_mut().filter(|_| self.framed) {
            o.put_slice(b"0\r\n\r\n");
        }
        State::Done
    }
}

/// The LF a CR must be followed by.
fn lf(b: u8) -> Result<(), ChunkError> {
    if b != b'\n' {
        return Err(ChunkError);
    }
    Ok(())
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

fn push_hex(out: &mut impl BufMut, mut n: u64) {
    let mut digits = [0u8; 16];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b"0123456789abcdef"[(n & 15) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.put_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(body: &[u8]) -> Result<(Vec<u8>, usize), ChunkError> {
        let mut c = Chunked::new();
        let mut out = Vec::new();
        let n = c.feed_into(body, Some(&mut out))?;
        assert!(c.done(), "{:?}", String::from_utf8_lossy(body));
        Ok((out, n))
    }

    #[test]
    fn reframes_what_nginx_accepts() {
        let (out, n) = canonical(b"5;ext=1\r\nhello\n0\nX-T: 1\r\n\r\nGET /next").unwrap();
        assert_eq!(out, b"5\r\nhello\r\n0\r\n\r\n");
        assert_eq!(n, b"5;ext=1\r\nhello\n0\nX-T: 1\r\n\r\n".len());
        let (out, _) = canonical(b"A \r\n0123456789\r\n0 ; x\r\n\r\n").unwrap();
        assert_eq!(out, b"a\r\n0123456789\r\n0\r\n\r\n");
    }

    #[test]
    fn refuses_what_nginx_refuses() {
        for bad in [
            &b"x\r\n"[..],
            b"5\rx",
            b"5\r\nhelloX",
            b"5\r\nhello\rX",
            b"ffffffffffffffff1\r\n",
            b"0\r\n\rX",
            b"-1\r\n",
            b"\r\n",
        ] {
            let mut c = Chunked::new();
            assert_eq!(
                c.feed(bad),
                Err(ChunkError),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn byte_by_byte_is_the_same() {
        let body = b"3\r\nabc\r\n10;e\r\n0123456789abcdef\r\n0\r\nT: v\r\n\r\n";
        let (whole, n) = canonical(body).unwrap();
        let mut c = Chunked::new();
        let mut out = Vec::new();
        for b in body.iter() {
            assert_eq!(c.feed_into(std::slice::from_ref(b), Some(&mut out)), Ok(1));
        }
        assert!(c.done());
        assert_eq!(out, whole);
        assert_eq!(n, body.len());
        assert_eq!(c.feed(b"more"), Ok(0));
    }
}
