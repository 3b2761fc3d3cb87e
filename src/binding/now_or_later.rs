//! Engine calls run on the calling thread as far as they go without waiting.
//!
//! An `async` napi method always hops twice: from Node's thread to the engine's runtime, and back
//! to settle its promise, tens of microseconds each, more on a loaded machine. Much of what the
//! engine does for a call waits on nothing (a session's record, the memory store, a status
//! checked and written): [`now_or_later`] polls the call once on Node's thread, in the runtime's
//! context, and answers its value at once when it is done; only a call that has to wait (the
//! application's code in JavaScript, a store's thread, a lock another call holds) is handed to
//! the runtime, which goes on from where it stopped, and answers a promise.
//!
//! What a call sends JavaScript on its way (an event for `subscribe()`, an error for `onError`)
//! reaches JavaScript before its caller goes on, in the order it was sent: handed to the host
//! function right there when JavaScript was handed everything queued before the call began (as
//! the reference calls its listeners), else queued behind it, the call then answering a promise
//! settled through a queue of its own made after the host's (Node runs the host's first).

use std::future::Future;
use std::task::{Context, Poll, Waker};

use napi::bindgen_prelude::{
    within_runtime_if_available, Either, FunctionRef, Promise, PromiseRaw, ToNapiValue,
};
use napi::{Env, JsValue};

use super::error::Settled;
use super::host::Host;

/// The value now, or a promise of it: JavaScript awaits either alike.
pub(crate) type NowOrLater<'env, T> = Either<T, PromiseRaw<'env, Settled<T>>>;

/// Runs `future` (an engine call behind [`super::error::guard`]) on this thread until it has to
/// wait: its value, or its error thrown, when it did not; else a promise of what it gives once
/// the runtime has driven it to its end.
///
/// The first poll uses a waker that does nothing: a future that is not ready is spawned, and
/// the runtime's first poll of it registers the runtime's own waker, so that no wake-up is lost.
pub(crate) fn now_or_later<'env, T, F>(
    env: &'env Env,
    host: &Host,
    host_function: &FunctionRef<String, Promise<String>>,
    future: F,
) -> napi::Result<NowOrLater<'env, T>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = Settled<T>> + Send + 'static,
{
    let mut future = Box::pin(future);
    let mut context = Context::from_waker(Waker::noop());
    // What was queued before the call began must reach JavaScript before what the call sends;
    // what other threads queue while it runs may come after.
    let mark = host.mark();
    let (polled, kept, mut queued) =
        host.capture(|| within_runtime_if_available(|| future.as_mut().poll(&mut context)));
    if !kept.is_empty() {
        if host.handed_up_to(mark) {
            let function = host_function.borrow_back(env)?;
            for call in kept {
                // The host answers every call with a promise, never a throw: nothing to wait for.
                drop(function.call(call)?);
            }
        } else {
            host.queue(kept);
            queued = true;
        }
    }
    match polled {
        Poll::Ready(settled) if queued => {
            let (deferred, promise) = env.create_deferred()?;
            deferred.resolve(move |_| Ok(settled));
            Ok(Either::B(PromiseRaw::new(env.raw(), promise.raw())))
        }
        Poll::Ready(settled) => settled.now(env).map(Either::A),
        Poll::Pending => env
            .spawn_future(async move { Ok(future.await) })
            .map(Either::B),
    }
}
