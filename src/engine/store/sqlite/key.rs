//! The encryption key of a SQLite store, as `createSqliteSessionStore()` is given it: read and
//! checked here, once.
//!
//! A key is 32 bytes, given as bytes, as 64 hex digits, or in base64 (read as Node's
//! `Buffer.from(text, 'base64')` reads it: the standard and the URL alphabet alike, any other
//! character skipped, the text ending at the first `=`), so that a key that worked before keeps
//! working. An empty environment variable is no key; an empty option is a mistake, never
//! encryption turned off. No refusal holds the key or any part of it.

use crate::engine::error::{Result, SessionError};

/// The key a caller handed over, as the binding read it.
#[derive(Clone, PartialEq, Eq)]
pub enum GivenKey {
    /// `undefined` or `null`: no key.
    Absent,
    /// A string: 64 hex digits, or base64.
    Text(String),
    /// A `Uint8Array` (a `Buffer` among them): the key's bytes.
    Bytes(Vec<u8>),
    /// Anything else.
    Other,
}

impl std::fmt::Debug for GivenKey {
    /// Never the key itself.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GivenKey::Absent => "GivenKey::Absent",
            GivenKey::Text(_) => "GivenKey::Text(..)",
            GivenKey::Bytes(_) => "GivenKey::Bytes(..)",
            GivenKey::Other => "GivenKey::Other",
        })
    }
}

/// The key `given`: `from_environment` names the environment variable it was read from (whose
/// empty value is no key), `None` for the `encryptionKey` option.
///
/// # Errors
/// [`SessionError::Input`] at `encryptionKey` (or the variable) for a key that is not 32 bytes.
pub fn encryption_key(given: GivenKey, from_environment: Option<&str>) -> Result<Option<[u8; 32]>> {
    let path = from_environment.unwrap_or("encryptionKey");
    let bytes = match given {
        GivenKey::Absent => return Ok(None),
        GivenKey::Text(text) if text.is_empty() && from_environment.is_some() => return Ok(None),
        GivenKey::Text(text) => match hex(&text) {
            Some(bytes) => bytes,
            None => base64(&text),
        },
        GivenKey::Bytes(bytes) => bytes,
        GivenKey::Other => Vec::new(),
    };
    <[u8; 32]>::try_from(bytes.as_slice())
        .map(Some)
        .map_err(|_| {
            SessionError::input(
                path,
                format!("{path} must be 32 bytes: 64 hex digits, or base64"),
            )
        })
}

/// The 32 bytes of exactly 64 hex digits; `None` for any other text.
fn hex(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    if digits.len() != 64 {
        return None;
    }
    digits
        .chunks(2)
        .map(|pair| {
            let high = char::from(pair[0]).to_digit(16)?;
            let low = char::from(pair[1]).to_digit(16)?;
            u8::try_from(high * 16 + low).ok()
        })
        .collect()
}

/// The bytes of base64 `text`, as Node's `Buffer.from(text, 'base64')` gives them.
fn base64(text: &str) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(text.len() * 3 / 4);
    let (mut bits, mut held) = (0u32, 0u32);
    for c in text.chars() {
        let value = match c {
            'A'..='Z' => u32::from(c) - u32::from('A'),
            'a'..='z' => u32::from(c) - u32::from('a') + 26,
            '0'..='9' => u32::from(c) - u32::from('0') + 52,
            '+' | '-' => 62,
            '/' | '_' => 63,
            '=' => break,
            _ => continue,
        };
        bits = (bits << 6) | value;
        held += 6;
        if held >= 8 {
            held -= 8;
            bytes.push(u8::try_from((bits >> held) & 0xff).unwrap_or(0));
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex_of(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn base64_reads_as_node_does() {
        // Each pair is what `Buffer.from(text, 'base64').toString('hex')` gives on Node 20.
        for (text, expected) in [
            ("AAAA", "000000"),
            ("AA AA", "000000"),
            ("AA\nAA", "000000"),
            ("AA=A", "00"),
            ("A-_A", "03efc0"),
            ("A*AA", "0000"),
            ("QQ==QQ==", "41"),
            ("QUJD\u{e9}REVG", "414243444546"),
            ("A", ""),
            ("AA", "00"),
            ("AAA", "0000"),
            ("", ""),
        ] {
            assert_eq!(hex_of(&base64(text)), expected, "{text:?}");
        }
    }

    #[test]
    fn a_key_is_32_bytes_in_any_of_its_forms() {
        let key: Vec<u8> = (0u8..32).collect();
        let as_hex = hex_of(&key);
        let as_base64 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
        for given in [
            GivenKey::Bytes(key.clone()),
            GivenKey::Text(as_hex.clone()),
            GivenKey::Text(as_hex.to_uppercase()),
            GivenKey::Text(as_base64.to_owned()),
            GivenKey::Text(format!("{as_base64}\n")),
        ] {
            assert_eq!(
                encryption_key(given, None).unwrap().map(Vec::from),
                Some(key.clone())
            );
        }
    }

    #[test]
    fn no_key_only_when_none_is_given_or_the_variable_is_empty() {
        assert_eq!(encryption_key(GivenKey::Absent, None).unwrap(), None);
        assert_eq!(
            encryption_key(GivenKey::Text(String::new()), Some("KEY")).unwrap(),
            None
        );
        for given in [
            GivenKey::Text(String::new()),
            GivenKey::Text("short".into()),
            GivenKey::Text("zz".repeat(32)),
            GivenKey::Text("A".repeat(44)),
            GivenKey::Bytes(vec![0; 31]),
            GivenKey::Bytes(vec![0; 33]),
            GivenKey::Other,
        ] {
            let error = encryption_key(given, None).unwrap_err();
            assert_eq!(
                error,
                SessionError::input(
                    "encryptionKey",
                    "encryptionKey must be 32 bytes: 64 hex digits, or base64"
                )
            );
        }
        let error = encryption_key(GivenKey::Text("x".into()), Some("KEY")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "KEY must be 32 bytes: 64 hex digits, or base64"
        );
    }
}
