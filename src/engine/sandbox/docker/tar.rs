//! The little of the tar format the Docker archive API needs: writing directories and one file
//! with their owner and mode, and reading the one file of a downloaded archive as a stream.

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};

use crate::engine::error::{Result, SessionError};
use crate::engine::sandbox::view::FileStream;

const BLOCK: usize = 512;

/// An entry to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryKind {
    /// A directory.
    Directory,
    /// A regular file of this size.
    File(u64),
}

/// Appends the header of an entry `name` (relative, `/`-separated) to `archive`; a name too long
/// for the header goes in a PAX record before it.
pub(crate) fn append_header(
    archive: &mut Vec<u8>,
    name: &str,
    kind: EntryKind,
    mode: u32,
    uid: u64,
    gid: u64,
) {
    let name = match kind {
        EntryKind::Directory if !name.ends_with('/') => format!("{name}/"),
        _ => name.to_owned(),
    };
    if name.len() > 99 {
        let record = pax_record("path", &name);
        let mut header = header_block("././@PaxHeader", b'x', record.len() as u64, 0o644, 0, 0);
        checksum(&mut header);
        archive.extend_from_slice(&header);
        archive.extend_from_slice(&record);
        pad(archive, record.len());
    }
    let (typeflag, size) = match kind {
        EntryKind::Directory => (b'5', 0),
        EntryKind::File(size) => (b'0', size),
    };
    let short: String = name.chars().take(99).collect();
    let mut header = header_block(&short, typeflag, size, mode, uid, gid);
    checksum(&mut header);
    archive.extend_from_slice(&header);
}

/// Pads `archive` after `written` bytes of content to the next block.
pub(crate) fn pad(archive: &mut Vec<u8>, written: usize) {
    let rest = written % BLOCK;
    if rest != 0 {
        archive.resize(archive.len() + BLOCK - rest, 0);
    }
}

/// Ends an archive.
pub(crate) fn finish(archive: &mut Vec<u8>) {
    archive.resize(archive.len() + 2 * BLOCK, 0);
}

fn pax_record(key: &str, value: &str) -> Vec<u8> {
    // "<length> <key>=<value>\n", where the length counts itself.
    let body = format!(" {key}={value}\n");
    let mut length = body.len() + 1;
    while format!("{length}").len() + body.len() != length {
        length += 1;
    }
    format!("{length}{body}").into_bytes()
}

fn header_block(name: &str, typeflag: u8, size: u64, mode: u32, uid: u64, gid: u64) -> [u8; BLOCK] {
    let mut header = [0u8; BLOCK];
    let name = name.as_bytes();
    header[..name.len().min(100)].copy_from_slice(&name[..name.len().min(100)]);
    octal(&mut header[100..108], u64::from(mode));
    octal(&mut header[108..116], uid);
    octal(&mut header[116..124], gid);
    octal(&mut header[124..136], size);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or_default();
    octal(&mut header[136..148], now);
    header[156] = typeflag;
    header[257..263].copy_from_slice(b"ustar\0");
    header[263..265].copy_from_slice(b"00");
    header
}

/// Writes `value` in octal, zero-padded, NUL-terminated, into `field`.
fn octal(field: &mut [u8], value: u64) {
    let digits = field.len() - 1;
    let text = format!("{value:0digits$o}");
    let text = text.as_bytes();
    let start = text.len().saturating_sub(digits);
    field[..digits].copy_from_slice(&text[start..]);
    field[digits] = 0;
}

fn checksum(header: &mut [u8; BLOCK]) {
    header[148..156].fill(b' ');
    let sum: u32 = header.iter().map(|byte| u32::from(*byte)).sum();
    let text = format!("{sum:06o}\0 ");
    header[148..156].copy_from_slice(text.as_bytes());
}

/// Reads a number field: octal text, or base-256 for large values.
fn parse_number(field: &[u8]) -> Option<u64> {
    if field.first().is_some_and(|first| first & 0x80 != 0) {
        let mut value: u64 = u64::from(field[0] & 0x7f);
        for byte in &field[1..] {
            value = value.checked_mul(256)?.checked_add(u64::from(*byte))?;
        }
        return Some(value);
    }
    let text: String = field
        .iter()
        .take_while(|byte| **byte != 0)
        .map(|byte| char::from(*byte))
        .collect();
    let text = text.trim();
    if text.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(text, 8).ok()
}

/// The first regular file of the tar archive `archive`, as a stream of its contents.
///
/// # Errors
///
/// When the archive is malformed, holds no regular file first (a directory, a link), or its
/// transport fails; `describe` words a transport error.
pub(crate) async fn first_file<S, E>(
    mut archive: S,
    describe: impl Fn(E) -> SessionError + Send + Sync + 'static,
) -> Result<FileStream>
where
    S: Stream<Item = std::result::Result<Bytes, E>> + Send + Unpin + 'static,
    E: Send + 'static,
{
    let mut buffer = BytesMut::new();
    loop {
        while buffer.len() < BLOCK {
            match archive.next().await {
                Some(Ok(chunk)) => buffer.extend_from_slice(&chunk),
                Some(Err(error)) => return Err(describe(error)),
                None => {
                    return Err(SessionError::host(
                        "The Docker Engine sent a truncated file archive.",
                    ))
                }
            }
        }
        let header = buffer.split_to(BLOCK);
        if header.iter().all(|byte| *byte == 0) {
            return Err(SessionError::host(
                "The Docker Engine sent an empty file archive.",
            ));
        }
        let size = parse_number(&header[124..136]).ok_or_else(|| {
            SessionError::host("The Docker Engine sent a file archive with a malformed header.")
        })?;
        match header[156] {
            b'0' | 0 | b'7' => {
                let stream = futures::stream::unfold(
                    (archive, buffer, size, describe),
                    |(mut archive, mut buffer, remaining, describe)| async move {
                        if remaining == 0 {
                            return None;
                        }
                        if buffer.is_empty() {
                            match archive.next().await {
                                Some(Ok(chunk)) => buffer.extend_from_slice(&chunk),
                                Some(Err(error)) => {
                                    return Some((
                                        Err(describe(error)),
                                        (archive, buffer, 0, describe),
                                    ))
                                }
                                None => {
                                    return Some((
                                        Err(SessionError::host(
                                            "The Docker Engine cut a file short.",
                                        )),
                                        (archive, buffer, 0, describe),
                                    ))
                                }
                            }
                        }
                        let take = usize::try_from(remaining)
                            .unwrap_or(usize::MAX)
                            .min(buffer.len());
                        let chunk = buffer.split_to(take).freeze();
                        Some((
                            Ok(chunk),
                            (archive, buffer, remaining - take as u64, describe),
                        ))
                    },
                );
                return Ok(Box::pin(stream));
            }
            b'x' | b'g' | b'L' | b'K' => {
                // Extended headers: skip their records.
                let mut skip = usize::try_from(size.div_ceil(BLOCK as u64) * BLOCK as u64)
                    .map_err(|_| {
                        SessionError::host(
                            "The Docker Engine sent a file archive with a malformed header.",
                        )
                    })?;
                while skip > 0 {
                    if buffer.is_empty() {
                        match archive.next().await {
                            Some(Ok(chunk)) => buffer.extend_from_slice(&chunk),
                            Some(Err(error)) => return Err(describe(error)),
                            None => {
                                return Err(SessionError::host(
                                    "The Docker Engine sent a truncated file archive.",
                                ))
                            }
                        }
                    }
                    let take = skip.min(buffer.len());
                    let _ = buffer.split_to(take);
                    skip -= take;
                }
            }
            b'5' => return Err(SessionError::host("The path is a directory, not a file.")),
            other => {
                return Err(SessionError::host(format!(
                    "The path is not a regular file (tar entry type {:?}).",
                    char::from(other)
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::TryStreamExt;

    fn archive_with(name: &str, content: &[u8]) -> Vec<u8> {
        let mut archive = Vec::new();
        append_header(&mut archive, "dir", EntryKind::Directory, 0o755, 1000, 1000);
        append_header(
            &mut archive,
            name,
            EntryKind::File(content.len() as u64),
            0o644,
            1000,
            1000,
        );
        archive.extend_from_slice(content);
        pad(&mut archive, content.len());
        finish(&mut archive);
        archive
    }

    #[tokio::test]
    async fn a_file_reads_back_across_chunk_boundaries() {
        let content: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let mut archive = Vec::new();
        append_header(
            &mut archive,
            &"long/".repeat(40),
            EntryKind::File(content.len() as u64),
            0o600,
            1,
            2,
        );
        archive.extend_from_slice(&content);
        pad(&mut archive, content.len());
        finish(&mut archive);
        let chunks: Vec<std::result::Result<Bytes, std::io::Error>> = archive
            .chunks(333)
            .map(|chunk| Ok(Bytes::copy_from_slice(chunk)))
            .collect();
        let stream = first_file(futures::stream::iter(chunks), |error: std::io::Error| {
            SessionError::host(error.to_string())
        })
        .await
        .expect("a file");
        let read: Vec<Bytes> = stream.try_collect().await.expect("its content");
        assert_eq!(read.concat(), content);
    }

    #[tokio::test]
    async fn a_directory_first_is_refused() {
        let archive = archive_with("dir/file", b"x");
        let chunks = vec![Ok::<_, std::io::Error>(Bytes::from(archive))];
        let result = first_file(futures::stream::iter(chunks), |error: std::io::Error| {
            SessionError::host(error.to_string())
        })
        .await;
        assert!(result.is_err());
    }

    #[test]
    fn headers_are_valid_ustar() {
        let archive = archive_with("dir/a.txt", b"hello");
        assert_eq!(archive.len() % BLOCK, 0);
        assert_eq!(&archive[257..262], b"ustar");
        assert_eq!(parse_number(&archive[BLOCK + 124..BLOCK + 136]), Some(5));
        assert_eq!(parse_number(&archive[BLOCK + 108..BLOCK + 116]), Some(1000));
        assert_eq!(pax_record("path", "x"), b"9 path=x\n");
        assert_eq!(pax_record("path", "xy"), b"11 path=xy\n");
    }
}
