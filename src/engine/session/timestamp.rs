//! [`Timestamp`]: a record's `createdAt`/`updatedAt`, an ISO 8601 string as
//! `Date.prototype.toISOString()` writes it (`2026-12-02T00:50:45.123Z`), with the milliseconds it
//! stands for, to order and time sessions by.
//!
//! Invariants:
//! - a timestamp made here ([`Timestamp::from_millis`]) is whole milliseconds, written as
//!   `toISOString()` writes them (years outside 0..=9999 as `+YYYYYY`/`-YYYYYY`);
//! - a timestamp read from a record keeps its text as it was given: a store gives back what it was
//!   given; its milliseconds are those of the ISO 8601 date-time it holds, or `-∞` when it holds
//!   none (such a session lists last);
//! - a number (the epoch milliseconds harness-sessions 0.1 wrote) reads as that time, written in
//!   ISO 8601.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An ISO 8601 date-time and the milliseconds since the epoch it stands for.
#[derive(Clone, PartialEq)]
pub struct Timestamp {
    text: Box<str>,
    millis: f64,
}

impl Timestamp {
    /// The time `millis` milliseconds after the epoch, cut to a whole millisecond as a JavaScript
    /// `Date` does, and kept within a `Date`'s range (±8.64e15 ms; not a number is the epoch).
    pub fn from_millis(millis: f64) -> Timestamp {
        let millis = if millis.is_nan() {
            0.0
        } else {
            millis.clamp(-MAX_MILLIS, MAX_MILLIS).trunc()
        };
        Timestamp {
            text: iso_string(millis as i64).into_boxed_str(),
            millis,
        }
    }

    /// The time `text` says, kept as written.
    pub fn from_text(text: impl Into<Box<str>>) -> Timestamp {
        let text = text.into();
        let millis = parse_iso(&text).map_or(f64::NEG_INFINITY, |ms| ms as f64);
        Timestamp { text, millis }
    }

    /// Milliseconds since the epoch; `-∞` when the text is no ISO 8601 date-time.
    pub fn millis(&self) -> f64 {
        self.millis
    }

    /// The ISO 8601 text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Shape {
            Text(String),
            Millis(f64),
        }
        Ok(
            match Shape::deserialize(deserializer)
                .map_err(|_| serde::de::Error::custom("a time must be an ISO 8601 string"))?
            {
                Shape::Text(text) => Timestamp::from_text(text),
                Shape::Millis(millis) => Timestamp::from_millis(millis),
            },
        )
    }
}

const MS_PER_DAY: i64 = 86_400_000;

/// The farthest a JavaScript `Date` reaches from the epoch, in milliseconds.
const MAX_MILLIS: f64 = 8.64e15;

/// `millis` as `Date.prototype.toISOString()` writes it.
fn iso_string(millis: i64) -> String {
    let days = millis.div_euclid(MS_PER_DAY);
    let in_day = millis.rem_euclid(MS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let year = if (0..=9999).contains(&year) {
        format!("{year:04}")
    } else if year < 0 {
        format!("-{:06}", -year)
    } else {
        format!("+{year:06}")
    };
    format!(
        "{year}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

/// The date of day `days` after 1970-01-01 (proleptic Gregorian; Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The day after 1970-01-01 of a date (the inverse of [`civil_from_days`]).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = year - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let month = i64::from(month);
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The milliseconds of an ISO 8601 date-time: `YYYY-MM-DD`, optionally `THH:MM`, `:SS`, a
/// fraction, and `Z` or `±HH:MM` (a date-time without a zone is read as UTC); the year may be
/// `±YYYYYY`.
fn parse_iso(text: &str) -> Option<i64> {
    let mut rest = text.as_bytes();
    let digits = |rest: &mut &[u8], count: usize| -> Option<i64> {
        if rest.len() < count || !rest[..count].iter().all(u8::is_ascii_digit) {
            return None;
        }
        let value = std::str::from_utf8(&rest[..count]).ok()?.parse().ok()?;
        *rest = &rest[count..];
        Some(value)
    };
    let year = match rest.first()? {
        b'+' | b'-' => {
            let negative = rest[0] == b'-';
            rest = &rest[1..];
            let year = digits(&mut rest, 6)?;
            if negative {
                -year
            } else {
                year
            }
        }
        _ => digits(&mut rest, 4)?,
    };
    let expect = |rest: &mut &[u8], byte: u8| -> Option<()> {
        (rest.first() == Some(&byte)).then(|| *rest = &rest[1..])
    };
    expect(&mut rest, b'-')?;
    let month = u32::try_from(digits(&mut rest, 2)?).ok()?;
    expect(&mut rest, b'-')?;
    let day = u32::try_from(digits(&mut rest, 2)?).ok()?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let mut millis = days_from_civil(year, month, day) * MS_PER_DAY;
    if rest.is_empty() {
        return Some(millis);
    }
    expect(&mut rest, b'T')?;
    let hours = digits(&mut rest, 2)?;
    expect(&mut rest, b':')?;
    let minutes = digits(&mut rest, 2)?;
    let mut seconds = 0;
    let mut fraction = 0;
    if rest.first() == Some(&b':') {
        rest = &rest[1..];
        seconds = digits(&mut rest, 2)?;
        if rest.first() == Some(&b'.') {
            rest = &rest[1..];
            let count = rest.iter().take_while(|b| b.is_ascii_digit()).count();
            if count == 0 {
                return None;
            }
            let kept = count.min(3);
            fraction = digits(&mut rest, kept)? * 10_i64.pow(3 - kept as u32);
            rest = &rest[count - kept..];
        }
    }
    if hours > 24
        || minutes > 59
        || seconds > 59
        || (hours == 24 && minutes + seconds + fraction > 0)
    {
        return None;
    }
    millis += ((hours * 60 + minutes) * 60 + seconds) * 1000 + fraction;
    match rest {
        [] | [b'Z'] => Some(millis),
        [sign @ (b'+' | b'-'), ..] => {
            let mut zone = &rest[1..];
            let zone_hours = digits(&mut zone, 2)?;
            expect(&mut zone, b':')?;
            let zone_minutes = digits(&mut zone, 2)?;
            if !zone.is_empty() || zone_hours > 23 || zone_minutes > 59 {
                return None;
            }
            let offset = (zone_hours * 60 + zone_minutes) * 60_000;
            Some(if *sign == b'+' {
                millis - offset
            } else {
                millis + offset
            })
        }
        _ => None,
    }
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_what_to_iso_string_writes() {
        // Each pair checked against `new Date(ms).toISOString()` in Node.
        for (millis, text) in [
            (0.0, "1970-01-01T00:00:00.000Z"),
            (1_796_173_427_944.0, "2026-12-02T01:03:47.944Z"),
            (951_782_400_000.0, "2000-02-29T00:00:00.000Z"),
            (-1.0, "1969-12-31T23:59:59.999Z"),
            (253_402_300_799_999.0, "9999-12-31T23:59:59.999Z"),
            (253_402_300_800_000.0, "+010000-01-01T00:00:00.000Z"),
            (-62_167_219_200_001.0, "-000001-12-31T23:59:59.999Z"),
            (1_500.7, "1970-01-01T00:00:01.500Z"),
        ] {
            let stamp = Timestamp::from_millis(millis);
            assert_eq!(stamp.as_str(), text);
            assert_eq!(stamp.millis(), millis.trunc());
            assert_eq!(parse_iso(text), Some(millis.trunc() as i64), "{text}");
        }
    }

    #[test]
    fn reads_iso_8601_and_keeps_the_text() {
        for (text, millis) in [
            ("2026-12-02T00:23:47Z", 1_796_171_027_000_i64),
            ("2026-12-02T01:23:47.944+01:00", 1_796_171_027_944),
            ("2026-12-02T00:23:47.9449Z", 1_796_171_027_944),
            ("2026-12-02", 1_796_169_600_000),
            ("2026-12-02T00:23", 1_796_170_980_000),
        ] {
            let stamp = Timestamp::from_text(text);
            assert_eq!(stamp.as_str(), text);
            assert_eq!(stamp.millis(), millis as f64, "{text}");
        }
        for bad in [
            "",
            "yesterday",
            "2026-13-01",
            "2026-02-30",
            "2026-12-02T25:00Z",
            "2026-12-02T00:00:00.Z",
            "2026-12-02T00:00:00Zx",
        ] {
            assert_eq!(
                Timestamp::from_text(bad).millis(),
                f64::NEG_INFINITY,
                "{bad}"
            );
            assert_eq!(Timestamp::from_text(bad).as_str(), bad);
        }
    }

    #[test]
    fn reads_strings_and_the_epoch_milliseconds_of_0_1() {
        let text: Timestamp = serde_json::from_str("\"2026-12-02T01:03:47.944Z\"").unwrap();
        assert_eq!(text.millis(), 1_796_173_427_944.0);
        let number: Timestamp = serde_json::from_str("1796173427944").unwrap();
        assert_eq!(number.as_str(), "2026-12-02T01:03:47.944Z");
        assert_eq!(
            serde_json::to_string(&number).unwrap(),
            "\"2026-12-02T01:03:47.944Z\""
        );
        assert!(serde_json::from_str::<Timestamp>("null").is_err());
        assert!(serde_json::from_str::<Timestamp>("{}").is_err());
    }
}
