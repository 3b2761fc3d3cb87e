//! What JavaScript hands over as it is, read on this side: the argument types of the calls that
//! take a session id, a file path or an encryption key.
//!
//! napi reads a string as UTF-8, which turns a lone surrogate into U+FFFD: `'a\udc00'` would
//! arrive as `'a\u{fffd}'`, another id. [`GivenText`] reads any value without failing: a
//! string as text, told apart from one with a lone surrogate (read again as UTF-16 when, and only
//! when, its UTF-8 holds a U+FFFD), and anything else as not text. The rules of what the text
//! must be are the engine's (`engine::input`, `engine::store::sqlite::key`); a refusal crosses
//! back as the engine's error, so JavaScript checks none of it.

use std::ptr;

use napi::bindgen_prelude::{FromNapiValue, TypeName, Utf16String, ValidateNapiValue};
use napi::{check_status, sys, ValueType};

use crate::engine::input::GivenText;
use crate::engine::store::sqlite::key::GivenKey;

/// The type of `value`, as `typeof` would say it.
///
/// # Safety
/// `env` and `value` are those of the call napi is converting an argument of.
unsafe fn type_of(env: sys::napi_env, value: sys::napi_value) -> napi::Result<sys::napi_valuetype> {
    let mut kind = 0;
    check_status!(
        unsafe { sys::napi_typeof(env, value, &mut kind) },
        "the type of an argument could not be read"
    )?;
    Ok(kind)
}

impl FromNapiValue for GivenText {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Self> {
        // SAFETY: napi calls this with the call's `env` and argument.
        if unsafe { type_of(env, value)? } != sys::ValueType::napi_string {
            return Ok(GivenText::NotText);
        }
        // SAFETY: as above; the value is a string.
        let text = unsafe { String::from_napi_value(env, value)? };
        if text.contains('\u{FFFD}') {
            // SAFETY: as above.
            let units = unsafe { Utf16String::from_napi_value(env, value)? };
            if char::decode_utf16(units.iter().copied()).any(|c| c.is_err()) {
                return Ok(GivenText::LoneSurrogate);
            }
        }
        Ok(GivenText::Text(text))
    }
}

/// `unknown` to napi's types: JavaScript may give anything; the reader sorts it out.
macro_rules! given_as_unknown {
    ($($given:ty),*) => {$(
        impl TypeName for $given {
            fn type_name() -> &'static str {
                "unknown"
            }

            fn value_type() -> ValueType {
                ValueType::Unknown
            }
        }

        impl ValidateNapiValue for $given {}
    )*};
}

given_as_unknown!(GivenText, GivenKey);

impl FromNapiValue for GivenKey {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Self> {
        // SAFETY: napi calls this with the call's `env` and argument.
        match unsafe { type_of(env, value)? } {
            sys::ValueType::napi_undefined | sys::ValueType::napi_null => Ok(GivenKey::Absent),
            sys::ValueType::napi_string => {
                // SAFETY: as above; the value is a string.
                Ok(GivenKey::Text(unsafe {
                    String::from_napi_value(env, value)?
                }))
            }
            // SAFETY: as above.
            sys::ValueType::napi_object => {
                Ok(unsafe { bytes_of(env, value)? }.map_or(GivenKey::Other, GivenKey::Bytes))
            }
            _ => Ok(GivenKey::Other),
        }
    }
}

/// The bytes of `value` when it is a `Uint8Array` (a `Buffer` among them), copied.
///
/// # Safety
/// As [`type_of`].
unsafe fn bytes_of(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Option<Vec<u8>>> {
    let mut is_typed_array = false;
    check_status!(unsafe { sys::napi_is_typedarray(env, value, &mut is_typed_array) })?;
    if !is_typed_array {
        return Ok(None);
    }
    let (mut kind, mut length, mut data) = (0, 0usize, ptr::null_mut());
    check_status!(unsafe {
        sys::napi_get_typedarray_info(
            env,
            value,
            &mut kind,
            &mut length,
            &mut data,
            ptr::null_mut(),
            ptr::null_mut(),
        )
    })?;
    if kind != sys::TypedarrayType::uint8_array {
        return Ok(None);
    }
    if data.is_null() || length == 0 {
        return Ok(Some(Vec::new()));
    }
    // SAFETY: napi gives the first element of a Uint8Array of `length` bytes, alive for the call.
    Ok(Some(
        unsafe { std::slice::from_raw_parts(data.cast::<u8>(), length) }.to_vec(),
    ))
}
