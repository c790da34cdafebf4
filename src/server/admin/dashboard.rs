//! The dashboard at the admin listener's `/`: one HTML page with its CSS
//! and script inline, so that it works offline, behind any proxy and with
//! no build step; it reads the same JSON API a script would (every 2 s)
//! and computes the rates itself from successive counter readings.
//!
//! Why a hash-pinned Content-Security-Policy: the page shows client keys,
//! which are the clients' own bytes. The script only ever writes them as
//! text, and the policy is the second fence: only the page's own inline
//! script and style run (by their SHA-256), it may only fetch from the
//! admin listener, and no other page may frame it.

use std::sync::LazyLock;

/// The page, as served.
pub(super) const PAGE: &str = include_str!("dashboard.html");

/// The page's policy, with its script's and style's hashes.
pub(super) fn csp() -> &'static str {
    static CSP: LazyLock<String> = LazyLock::new(|| {
        format!(
            "default-src 'none'; connect-src 'self'; img-src 'self' data:; \
             script-src 'sha256-{}'; style-src 'sha256-{}'; base-uri 'none'; \
             form-action 'none'; frame-ancestors 'none'",
            inline_hash(PAGE, "script"),
            inline_hash(PAGE, "style"),
        )
    });
    &CSP
}

/// The base64 SHA-256 of the content of `page`'s first `<tag>` element,
/// as CSP's `'sha256-…'` names an inline element.
fn inline_hash(page: &str, tag: &str) -> String {
    let open = format!("<{tag}>");
    let start = page.find(&open).map_or(0, |at| at + open.len());
    let end = page[start..]
        .find(&format!("</{tag}>"))
        .map_or(start, |n| start + n);
    base64(ring::digest::digest(&ring::digest::SHA256, &page.as_bytes()[start..end]).as_ref())
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_the_standard_one() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn the_policy_pins_the_pages_own_script_and_style() {
        let p = csp();
        // SHA-256 of the empty string: the page has both elements.
        let empty = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";
        assert!(!p.contains(empty), "{p}");
        assert_eq!(p.matches("'sha256-").count(), 2, "{p}");
        assert!(!p.contains("unsafe"), "{p}");
        assert!(PAGE.contains("<script>") && PAGE.contains("<style>"));
        assert!(
            !PAGE.contains("innerHTML"),
            "data reaches the page as text only"
        );
        // Nothing loaded from elsewhere: the page works offline.
        assert!(!PAGE.contains(" src=") && !PAGE.contains(" href="));
    }
}
