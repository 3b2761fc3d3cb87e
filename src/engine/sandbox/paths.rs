//! Which paths the file API of a sandbox may touch: the lexical half of the confinement.
//!
//! A [`PathPolicy`] holds a sandbox's working directories (its *roots*) and the directory that
//! relative paths start from. [`PathPolicy::resolve`] refuses, with a
//! [`SessionError::Input`] naming the path, any path with a `..` component, a NUL, or that lands
//! outside every root; it returns the normalized absolute path and its root. The other half,
//! symbolic links that lead out of the roots, needs the file system and is each backend's to check
//! ([`PathPolicy::contains`] tells whether a link's resolved target is still inside).

use crate::engine::error::{Result, SessionError};

/// A sandbox's working directories, and where relative paths start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPolicy {
    roots: Vec<String>,
    base: String,
}

/// A path the policy accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfinedPath {
    /// The normalized absolute path.
    pub absolute: String,
    /// The root it lies in (the longest one that contains it).
    pub root: String,
}

impl ConfinedPath {
    /// The components of the path below its root, in order (empty for the root itself).
    pub fn components_below_root(&self) -> Vec<&str> {
        let rest = if self.root == "/" {
            &self.absolute[1..]
        } else {
            self.absolute[self.root.len()..].trim_start_matches('/')
        };
        rest.split('/').filter(|part| !part.is_empty()).collect()
    }

    /// Each path from the first component below the root down to the path itself:
    /// `/w/a`, `/w/a/b`, `/w/a/b/c` for `/w/a/b/c` under `/w`.
    pub fn prefixes_below_root(&self) -> Vec<String> {
        let mut current = self.root.clone();
        self.components_below_root()
            .into_iter()
            .map(|part| {
                current = join(&current, part);
                current.clone()
            })
            .collect()
    }
}

impl PathPolicy {
    /// A policy with `roots` (absolute paths, normalized here) where relative paths start from
    /// `base`, itself absolute.
    ///
    /// # Errors
    ///
    /// When a root or the base is not absolute, or holds `..`.
    pub fn new(roots: impl IntoIterator<Item = String>, base: &str) -> Result<Self> {
        let mut normalized = Vec::new();
        for root in roots {
            let root = normalize_absolute(&root).ok_or_else(|| {
                SessionError::input(
                    root.clone(),
                    format!("The sandbox directory {root:?} is not an absolute path without `..`."),
                )
            })?;
            if !normalized.contains(&root) {
                normalized.push(root);
            }
        }
        let base = normalize_absolute(base).ok_or_else(|| {
            SessionError::input(
                base,
                format!("The working directory {base:?} is not an absolute path without `..`."),
            )
        })?;
        Ok(PathPolicy {
            roots: normalized,
            base,
        })
    }

    /// The roots, normalized.
    pub fn roots(&self) -> &[String] {
        &self.roots
    }

    /// Where relative paths start.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The same roots, with relative paths starting from `base`.
    pub fn with_base(&self, base: &str) -> Result<Self> {
        PathPolicy::new(self.roots.clone(), base)
    }

    /// The root that contains `absolute` (normalized), the longest one, if any.
    pub fn contains(&self, absolute: &str) -> Option<&str> {
        self.roots
            .iter()
            .filter(|root| is_within(absolute, root))
            .max_by_key(|root| root.len())
            .map(String::as_str)
    }

    /// `path`, absolute or relative to the base, normalized and checked against the roots.
    ///
    /// # Errors
    ///
    /// [`SessionError::Input`] with `path` as its path: an empty path, a NUL, a `..` component,
    /// or a path outside every root.
    pub fn resolve(&self, path: &str) -> Result<ConfinedPath> {
        if path.is_empty() {
            return Err(SessionError::input(path, "The path is empty."));
        }
        if path.contains('\0') {
            return Err(SessionError::input(
                path,
                format!("The path {path:?} contains a NUL character."),
            ));
        }
        if path.split('/').any(|part| part == "..") {
            return Err(SessionError::input(
                path,
                format!("The path {path:?} contains `..`: sandbox paths may not climb out of a directory."),
            ));
        }
        let joined = if path.starts_with('/') {
            path.to_owned()
        } else {
            join(&self.base, path)
        };
        let absolute = normalize_absolute(&joined).unwrap_or(joined);
        match self.contains(&absolute) {
            Some(root) => Ok(ConfinedPath {
                root: root.to_owned(),
                absolute,
            }),
            None => Err(self.outside(path)),
        }
    }

    /// The refusal of `path`, which leads outside the roots.
    pub fn outside(&self, path: &str) -> SessionError {
        SessionError::input(
            path,
            format!(
                "The path {path:?} is outside the sandbox's working directories ({}).",
                self.roots.join(", ")
            ),
        )
    }

    /// The refusal of `path`, which goes through a symbolic link that leads outside the roots.
    pub fn leads_out(&self, path: &str) -> SessionError {
        SessionError::input(
            path,
            format!(
                "The path {path:?} goes through a symbolic link that leads outside the sandbox's working directories ({}).",
                self.roots.join(", ")
            ),
        )
    }

    /// The refusal of `path`, which goes through a symbolic link to `target` outside the roots.
    pub fn link_outside(&self, path: &str, target: &str) -> SessionError {
        SessionError::input(
            path,
            format!(
                "The path {path:?} goes through a symbolic link to {target:?}, outside the sandbox's working directories ({}).",
                self.roots.join(", ")
            ),
        )
    }
}

/// `base/part`, with one slash between them.
pub fn join(base: &str, part: &str) -> String {
    if base.ends_with('/') {
        format!("{base}{part}")
    } else {
        format!("{base}/{part}")
    }
}

/// The parent directory of a normalized absolute path (`/` for `/` itself).
pub fn parent(absolute: &str) -> &str {
    match absolute.rfind('/') {
        Some(0) | None => "/",
        Some(index) => &absolute[..index],
    }
}

/// Whether the normalized absolute `path` is `root` or lies below it.
pub fn is_within(path: &str, root: &str) -> bool {
    root == "/"
        || path == root
        || (path.starts_with(root) && path.as_bytes().get(root.len()) == Some(&b'/'))
}

/// `path` without `.` components, repeated or trailing slashes; `None` unless it is absolute
/// and free of `..`.
pub fn normalize_absolute(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return None;
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return None,
            part => parts.push(part),
        }
    }
    Some(format!("/{}", parts.join("/")))
}

/// Resolves a symbolic link's `target` as the kernel would from the directory `directory`:
/// normalized, with `..` applied lexically (the directories are known to be real here).
pub fn resolve_link_target(directory: &str, target: &str) -> String {
    let joined = if target.starts_with('/') {
        target.to_owned()
    } else {
        join(directory, target)
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    format!("/{}", parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> PathPolicy {
        PathPolicy::new(
            [
                "/workspace".to_owned(),
                "/home/sandbox".to_owned(),
                "/tmp/".to_owned(),
            ],
            "/workspace/s1",
        )
        .unwrap_or_else(|error| panic!("{error}"))
    }

    #[test]
    fn relative_paths_start_from_the_base() {
        let resolved = policy().resolve("notes/./a.txt").ok();
        assert_eq!(
            resolved,
            Some(ConfinedPath {
                absolute: "/workspace/s1/notes/a.txt".into(),
                root: "/workspace".into()
            })
        );
    }

    #[test]
    fn absolute_paths_inside_a_root_are_accepted() {
        assert_eq!(
            policy()
                .resolve("/home/sandbox/.claude//x")
                .map(|p| p.absolute),
            Ok("/home/sandbox/.claude/x".into())
        );
        assert_eq!(policy().resolve("/tmp").map(|p| p.root), Ok("/tmp".into()));
    }

    #[test]
    fn dot_dot_is_refused_even_when_it_would_stay_inside() {
        for path in ["../x", "a/../b", "/workspace/..", ".."] {
            match policy().resolve(path) {
                Err(SessionError::Input { path: at, message }) => {
                    assert_eq!(at, path);
                    assert!(message.contains("`..`"), "{message}");
                }
                other => panic!("{path}: {other:?}"),
            }
        }
    }

    #[test]
    fn absolute_paths_outside_every_root_are_refused() {
        for path in ["/etc/passwd", "/", "/workspacex/a", "/home"] {
            match policy().resolve(path) {
                Err(SessionError::Input { message, .. }) => {
                    assert!(message.contains("outside"), "{message}")
                }
                other => panic!("{path}: {other:?}"),
            }
        }
    }

    #[test]
    fn prefixes_below_the_root() {
        let resolved = policy()
            .resolve("a/b")
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(
            resolved.prefixes_below_root(),
            vec!["/workspace/s1", "/workspace/s1/a", "/workspace/s1/a/b"]
        );
    }

    #[test]
    fn link_targets_resolve_like_the_kernel() {
        assert_eq!(resolve_link_target("/workspace/a", "../../etc"), "/etc");
        assert_eq!(
            resolve_link_target("/workspace/a", "b/./c"),
            "/workspace/a/b/c"
        );
        assert_eq!(resolve_link_target("/workspace", "/tmp/x/"), "/tmp/x");
        assert_eq!(parent("/workspace/a"), "/workspace");
        assert_eq!(parent("/a"), "/");
    }
}
