//! CRC-32 (IEEE 802.3, zlib's), the checksum nginx's `hash` balancer
//! uses: the same key must land on the same server as under nginx, so
//! the exact function matters, including its running (not finalised)
//! state that `hash … consistent` extends point by point.

/// The reflected polynomial of CRC-32/ISO-HDLC.
const POLY: u32 = 0xEDB8_8320;

/// The byte-at-a-time table, built at compile time.
static TABLE: [u32; 256] = table();

const fn table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { POLY ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

/// A running CRC: start with [`Crc::new`], feed with [`Crc::update`],
/// read with [`Crc::finish`] (which leaves the running state usable).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Crc(u32);

impl Crc {
    pub(crate) fn new() -> Crc {
        Crc(0xFFFF_FFFF)
    }

    pub(crate) fn update(mut self, bytes: &[u8]) -> Crc {
        for &b in bytes {
            self.0 = TABLE[((self.0 ^ u32::from(b)) & 0xFF) as usize] ^ (self.0 >> 8);
        }
        self
    }

    pub(crate) fn finish(self) -> u32 {
        self.0 ^ 0xFFFF_FFFF
    }
}

/// The CRC-32 of `bytes`.
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    Crc::new().update(bytes).finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check value of CRC-32/ISO-HDLC, and zlib's crc32 of a word.
    #[test]
    fn known_values() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"hello"), 0x3610_A686);
        // Feeding in pieces is the same as at once.
        assert_eq!(
            Crc::new().update(b"1234").update(b"56789").finish(),
            0xCBF4_3926
        );
    }
}
