//! What the addon says of itself: its version, and a deliberate panic that proves panics become
//! errors (used by the tests, hidden from the typings).

use napi_derive::napi;

use super::error::{guard, Settled};
use crate::engine::error::SessionError;

/// The version of the native addon.
#[napi]
pub fn native_version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

/// Panics inside the addon, synchronously or inside a future, for the tests: the panic must reach
/// JavaScript as an error.
#[napi(js_name = "__panicForTests")]
pub async fn panic_for_tests(in_future: bool) -> Settled<()> {
    if in_future {
        guard(async {
            tokio::task::yield_now().await;
            panic!("a deliberate panic inside a future");
            #[allow(unreachable_code)]
            Ok::<(), SessionError>(())
        })
        .await
    } else {
        Settled::from(
            std::panic::catch_unwind(|| panic!("a deliberate panic")).map_err(|payload| {
                SessionError::internal(crate::engine::error::panic_message(&*payload))
            }),
        )
    }
}
