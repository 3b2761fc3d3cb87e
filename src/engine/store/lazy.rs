//! A store opened at its first use.
//!
//! `createSqliteSessionStore()` is called where an application builds its manager, often at the
//! top level of a module (a Next.js route, which `next build` imports to read its configuration).
//! Wrapped in a [`LazyStore`], the SQLite file is opened, created if missing, by the first read or
//! write, not then. An opening that fails is reported to the call that needed the store and tried
//! again at the next one; once open, the store is the same for every call.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::OnceCell;

use super::SessionStore;
use crate::engine::error::{Result, SessionError};
use crate::engine::session::{SessionRecord, SessionSummary};

/// What opens the store: called at the first use, and again after a failed opening.
pub type OpenStore = Box<
    dyn Fn() -> Pin<Box<dyn Future<Output = Result<Arc<dyn SessionStore>>> + Send>> + Send + Sync,
>;

/// A [`SessionStore`] that opens the store it stands for at its first use.
pub struct LazyStore {
    open: OpenStore,
    store: OnceCell<Arc<dyn SessionStore>>,
    /// Whether a manager runs on this store: see [`SessionStore::claim`], kept here since the
    /// store a manager claims may not be open yet.
    claimed: AtomicBool,
}

impl LazyStore {
    /// A store that `open` gives at the first call of one of its methods.
    pub fn new(open: OpenStore) -> LazyStore {
        LazyStore {
            open,
            store: OnceCell::new(),
            claimed: AtomicBool::new(false),
        }
    }

    /// Whether the store has been opened.
    pub fn is_open(&self) -> bool {
        self.store.initialized()
    }

    async fn store(&self) -> Result<&Arc<dyn SessionStore>> {
        self.store.get_or_try_init(|| (self.open)()).await
    }
}

#[async_trait]
impl SessionStore for LazyStore {
    async fn save(&self, record: &SessionRecord, resume_state: Option<&Value>) -> Result<()> {
        self.store().await?.save(record, resume_state).await
    }

    async fn save_owned(&self, record: SessionRecord, resume_state: Option<Value>) -> Result<()> {
        self.store().await?.save_owned(record, resume_state).await
    }

    async fn get(&self, id: &str) -> Result<Option<SessionRecord>> {
        self.store().await?.get(id).await
    }

    async fn list(&self) -> Result<Vec<SessionSummary>> {
        self.store().await?.list().await
    }

    async fn list_json(&self) -> Result<String> {
        self.store().await?.list_json().await
    }

    async fn list_since(&self, known: u64) -> Result<String> {
        self.store().await?.list_since(known).await
    }

    async fn get_resume_state(&self, id: &str) -> Result<Option<Value>> {
        self.store().await?.get_resume_state(id).await
    }

    async fn delete(&self, id: &str) -> Result<()> {
        self.store().await?.delete(id).await
    }

    fn claim(&self) -> Result<()> {
        if self.claimed.swap(true, Ordering::SeqCst) {
            return Err(SessionError::host(
                "the store is in use by another session manager: one manager per store; shut \
                 the other down first",
            ));
        }
        Ok(())
    }

    async fn release(&self) -> Result<()> {
        self.claimed.store(false, Ordering::SeqCst);
        match self.store.get() {
            Some(store) => store.release().await,
            None => Ok(()),
        }
    }

    fn take_unreadable(&self) -> Vec<(String, SessionError)> {
        self.store
            .get()
            .map(|store| store.take_unreadable())
            .unwrap_or_default()
    }

    fn is_unreadable(&self, id: &str) -> bool {
        self.store
            .get()
            .is_some_and(|store| store.is_unreadable(id))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::engine::error::SessionError;
    use crate::engine::store::memory::MemoryStore;
    use crate::engine::store::sqlite::{SqliteStore, SqliteStoreOptions};

    #[tokio::test]
    async fn opens_at_the_first_use_and_once() {
        let opened = Arc::new(AtomicUsize::new(0));
        let count = opened.clone();
        let store = LazyStore::new(Box::new(move || {
            count.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Ok(Arc::new(MemoryStore::new()) as Arc<dyn SessionStore>) })
        }));
        assert_eq!(opened.load(Ordering::SeqCst), 0);
        assert!(!store.is_open());
        assert!(store.list().await.expect("list").is_empty());
        assert!(store.get("a").await.expect("get").is_none());
        assert_eq!(opened.load(Ordering::SeqCst), 1);
        assert!(store.is_open());
    }

    #[tokio::test]
    async fn a_failed_opening_is_reported_then_tried_again() {
        let tries = Arc::new(AtomicUsize::new(0));
        let count = tries.clone();
        let store = LazyStore::new(Box::new(move || {
            let attempt = count.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                if attempt == 0 {
                    Err(SessionError::host("could not open the store"))
                } else {
                    Ok(Arc::new(MemoryStore::new()) as Arc<dyn SessionStore>)
                }
            })
        }));
        let error = store.list().await.expect_err("the first opening fails");
        assert!(
            error.to_string().contains("could not open the store"),
            "{error}"
        );
        assert!(!store.is_open());
        assert!(store
            .list()
            .await
            .expect("the second opening works")
            .is_empty());
        assert_eq!(tries.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_sqlite_file_and_its_folders_appear_at_the_first_use() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("data").join("nested").join("sessions.db");
        let at = path.clone();
        let store = LazyStore::new(Box::new(move || {
            let at = at.clone();
            Box::pin(async move {
                let store = SqliteStore::open(&at, SqliteStoreOptions::default()).await?;
                Ok(Arc::new(store) as Arc<dyn SessionStore>)
            })
        }));
        assert!(
            !dir.path().join("data").exists(),
            "nothing created before the first use"
        );
        assert!(store.list().await.expect("list").is_empty());
        assert!(path.exists());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            for folder in [
                dir.path().join("data"),
                dir.path().join("data").join("nested"),
            ] {
                let mode = std::fs::metadata(&folder)
                    .expect("folder")
                    .permissions()
                    .mode()
                    & 0o777;
                assert_eq!(mode & 0o077, 0, "{} is {mode:o}", folder.display());
            }
        }
    }
}
