//! The little of the tar format the Docker archive API needs: directories with their owner and
//! mode, for the first directories of a new container (files go through `exec`, [`super::files`]).

const BLOCK: usize = 512;

/// An entry to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryKind {
    /// A directory.
    Directory,
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
        EntryKind::Directory => name.to_owned(),
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
    };
    let short: String = name.chars().take(99).collect();
    let mut header = header_block(&short, typeflag, size, mode, uid, gid);
    checksum(&mut header);
    archive.extend_from_slice(&header);
}

/// Pads `archive` after `written` bytes of content to the next block.
fn pad(archive: &mut Vec<u8>, written: usize) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_valid_ustar() {
        let mut archive = Vec::new();
        append_header(
            &mut archive,
            "workspace",
            EntryKind::Directory,
            0o755,
            1000,
            1000,
        );
        append_header(
            &mut archive,
            &"d/".repeat(80),
            EntryKind::Directory,
            0o755,
            1000,
            1000,
        );
        finish(&mut archive);
        assert_eq!(archive.len() % BLOCK, 0);
        assert_eq!(&archive[..10], b"workspace/");
        assert_eq!(&archive[257..262], b"ustar");
        assert_eq!(archive[156], b'5');
        assert_eq!(&archive[108..115], b"0001750");
        assert_eq!(pax_record("path", "x"), b"9 path=x\n");
        assert_eq!(pax_record("path", "xy"), b"11 path=xy\n");
    }
}
