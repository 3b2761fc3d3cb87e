//! How a resume state is stored: JSON text, or sealed with XChaCha20-Poly1305 when the store has
//! an encryption key.
//!
//! Invariants:
//! - a sealed row is `nonce (24 random bytes) || ciphertext || tag`, the nonce drawn from the
//!   operating system for every write, the associated data naming the purpose and the session id:
//!   a row copied to another session fails to open;
//! - reading fails closed, with a [`SessionError::Host`]: a sealed row with no key, a plaintext
//!   row when a key is configured, a wrong key, an altered or moved row, an unknown format;
//! - no message here holds the resume state, the key, or anything derived from them.

use chacha20poly1305::aead::{Aead, Generate, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use serde_json::Value;

use crate::engine::error::{Result, SessionError};

/// `resume_states.format` of a row holding the state as JSON text.
pub(crate) const FORMAT_PLAIN: i64 = 0;
/// `resume_states.format` of a row sealed with XChaCha20-Poly1305.
pub(crate) const FORMAT_SEALED: i64 = 1;

const NONCE_LEN: usize = 24;
const ASSOCIATED_DATA_PREFIX: &[u8] = b"harness-sessions resume state v1\0";

/// A resume state as its row holds it.
pub(crate) struct StoredResumeState {
    /// [`FORMAT_PLAIN`] or [`FORMAT_SEALED`].
    pub(crate) format: i64,
    /// The JSON text, or the sealed bytes.
    pub(crate) body: Vec<u8>,
}

/// Turns resume states into rows and back, sealing them when the store has a key.
pub(crate) struct ResumeStateCodec {
    cipher: Option<XChaCha20Poly1305>,
}

impl ResumeStateCodec {
    /// A codec that seals with `key`, or stores JSON text without one.
    pub(crate) fn new(key: Option<&[u8; 32]>) -> Self {
        Self {
            cipher: key.map(|key| XChaCha20Poly1305::new(&Key::from(*key))),
        }
    }

    /// Whether states are sealed.
    pub(crate) fn seals(&self) -> bool {
        self.cipher.is_some()
    }

    /// The row for `state` of session `session_id`.
    ///
    /// # Errors
    /// When no random nonce can be drawn, or sealing fails.
    pub(crate) fn encode(&self, session_id: &str, state: &Value) -> Result<StoredResumeState> {
        let text = serde_json::to_vec(state).map_err(|_| {
            SessionError::internal(format!(
                "could not serialize the resume state of session {session_id}"
            ))
        })?;
        let Some(cipher) = &self.cipher else {
            return Ok(StoredResumeState {
                format: FORMAT_PLAIN,
                body: text,
            });
        };
        let nonce = XNonce::try_generate().map_err(|_| {
            SessionError::host("could not draw a random nonce from the operating system")
        })?;
        let associated_data = associated_data(session_id);
        let sealed = cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: &text,
                    aad: &associated_data,
                },
            )
            .map_err(|_| {
                SessionError::internal(format!(
                    "could not encrypt the resume state of session {session_id}"
                ))
            })?;
        let mut body = Vec::with_capacity(NONCE_LEN + sealed.len());
        body.extend_from_slice(nonce.as_slice());
        body.extend_from_slice(&sealed);
        Ok(StoredResumeState {
            format: FORMAT_SEALED,
            body,
        })
    }

    /// The state a row of session `session_id` holds.
    ///
    /// # Errors
    /// [`SessionError::Host`], failing closed, in every case the module documentation lists.
    pub(crate) fn decode(&self, session_id: &str, stored: StoredResumeState) -> Result<Value> {
        let fail = |why: &str| {
            SessionError::host(format!("the resume state of session {session_id} {why}"))
        };
        let text = match (stored.format, &self.cipher) {
            (FORMAT_PLAIN, None) => stored.body,
            (FORMAT_PLAIN, Some(_)) => {
                return Err(fail(
                    "is stored unencrypted but the sqlite store has an encryption key: \
                     refusing to read it",
                ))
            }
            (FORMAT_SEALED, None) => {
                return Err(fail(
                    "is encrypted but the sqlite store was opened without an encryption key",
                ))
            }
            (FORMAT_SEALED, Some(cipher)) => {
                let undecryptable = || {
                    fail(
                        "could not be decrypted: the encryption key is wrong, or the stored row \
                         was altered or moved from another session",
                    )
                };
                if stored.body.len() < NONCE_LEN {
                    return Err(undecryptable());
                }
                let (nonce, sealed) = stored.body.split_at(NONCE_LEN);
                let nonce = XNonce::try_from(nonce).map_err(|_| undecryptable())?;
                let associated_data = associated_data(session_id);
                cipher
                    .decrypt(
                        &nonce,
                        Payload {
                            msg: sealed,
                            aad: &associated_data,
                        },
                    )
                    .map_err(|_| undecryptable())?
            }
            (_, _) => return Err(fail("is stored in a format this build does not know")),
        };
        // serde_json's message is positions only, but say nothing of the content anyway.
        serde_json::from_slice(&text).map_err(|_| fail("is not valid JSON"))
    }
}

fn associated_data(session_id: &str) -> Vec<u8> {
    let mut data = Vec::with_capacity(ASSOCIATED_DATA_PREFIX.len() + session_id.len());
    data.extend_from_slice(ASSOCIATED_DATA_PREFIX);
    data.extend_from_slice(session_id.as_bytes());
    data
}
