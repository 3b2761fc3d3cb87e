//! The pieces of JavaScript semantics the `ai` reader relies on, reproduced in Rust: partial-JSON
//! repair (`fixJson` + `parsePartialJson`, with `secureJsonParse`'s prototype-key check), the deep
//! metadata merge (`mergeObjects`, with the `TypeError` V8 throws on a primitive base), and the
//! `Number` to string conversion `JSON.stringify` uses.
//!
//! Each function is a line-by-line port of the named `ai` 7.0.112 function; divergences are the
//! ones Rust strings force (no lone UTF-16 surrogates) and serde_json's nesting limit of 128.

use serde_json::{Map, Value};

/// `Number.prototype.toString()` of `x`, as `JSON.stringify` writes a finite number.
pub(crate) fn number_to_string(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x == 0.0 {
        return "0".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    // The shortest digits that round-trip, the closest of them, ties to even, as ECMAScript
    // asks: serde_json's Ryu gives those (Rust's own `{:e}` breaks ties upwards).
    let Some((digits, n)) = shortest_digits(x.abs()) else {
        return format!("{x}");
    };
    let k = digits.len() as i64;
    let mut out = String::with_capacity(digits.len() + 8);
    if x < 0.0 {
        out.push('-');
    }
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if n > 0 { '+' } else { '-' });
        out.push_str(&(n - 1).abs().to_string());
    }
    out
}

/// The shortest decimal digits `s` of a finite positive `x` and the `n` with
/// `x = 0.s × 10^n` (ECMAScript's `s`, `k = s.len()`, `n`).
fn shortest_digits(x: f64) -> Option<(String, i64)> {
    let text = serde_json::to_string(&x).ok()?;
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i64>().ok()?),
        None => (text.as_str(), 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all: String = int_part.chars().chain(frac_part.chars()).collect();
    let significant = all.trim_start_matches('0');
    let digits = significant.trim_end_matches('0');
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // x = all × 10^(exponent − frac_part.len()); dropping trailing zeros moves the point.
    let trailing = (significant.len() - digits.len()) as i64;
    let power = exponent - frac_part.len() as i64 + trailing;
    Some((digits.to_owned(), digits.len() as i64 + power))
}

/// `String(value)` for a primitive, as V8 prints it in an error message.
fn display_primitive(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n
            .as_f64()
            .map(number_to_string)
            .unwrap_or_else(|| n.to_string()),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".to_owned(),
        Value::Array(_) | Value::Object(_) => "[object Object]".to_owned(),
    }
}

/// The UTF-16 code units of `s`, one string each (a lone surrogate becomes U+FFFD).
fn code_unit_strings(s: &str) -> impl Iterator<Item = String> + '_ {
    s.encode_utf16().map(|unit| {
        char::decode_utf16([unit])
            .map(|c| c.unwrap_or('\u{FFFD}'))
            .collect()
    })
}

/// `{ ...value }`: the own enumerable properties of `value` as a fresh object.
fn spread(value: &Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map.clone(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v.clone()))
            .collect(),
        Value::String(s) => code_unit_strings(s)
            .enumerate()
            .map(|(i, unit)| (i.to_string(), Value::String(unit)))
            .collect(),
        Value::Null | Value::Bool(_) | Value::Number(_) => Map::new(),
    }
}

/// The `for (const key in value)` keys of `value` with their values.
fn enumerate(value: &Value) -> Vec<(String, Value)> {
    match value {
        Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v.clone()))
            .collect(),
        Value::String(s) => code_unit_strings(s)
            .enumerate()
            .map(|(i, unit)| (i.to_string(), Value::String(unit)))
            .collect(),
        Value::Null | Value::Bool(_) | Value::Number(_) => Vec::new(),
    }
}

/// `key in base ? base[key] : undefined`, or the `TypeError` message when `base` is a primitive.
fn property<'a>(base: &'a Value, key: &str) -> Result<Option<&'a Value>, String> {
    match base {
        Value::Object(map) => Ok(map.get(key)),
        Value::Array(items) => Ok(key.parse::<usize>().ok().and_then(|i| items.get(i))),
        primitive => Err(format!(
            "Cannot use 'in' operator to search for '{key}' in {}",
            display_primitive(primitive)
        )),
    }
}

/// `mergeObjects(base, overrides)` of `ai` for two non-null values: a deep merge where objects
/// merge, everything else is replaced.
///
/// # Errors
///
/// The message of the `TypeError` JavaScript throws when `base` is a primitive and `overrides`
/// has keys.
pub(crate) fn merge_objects(base: &Value, overrides: &Value) -> Result<Value, String> {
    let mut result = spread(base);
    for (key, value) in enumerate(overrides) {
        if key == "__proto__" || key == "constructor" || key == "prototype" {
            continue;
        }
        let base_value = property(base, &key)?;
        let merged = match (&value, base_value) {
            (Value::Object(_), Some(base_value @ Value::Object(_))) => {
                merge_objects(base_value, &value)?
            }
            _ => value,
        };
        result.insert(key, merged);
    }
    Ok(Value::Object(result))
}

/// `JSON.parse` followed by `secureJsonParse`'s check: `None` when the text is not JSON, or holds
/// a `__proto__` key or a `constructor` object with a `prototype` key.
pub(crate) fn secure_json_parse(text: &str) -> Option<Value> {
    fn forbidden(value: &Value) -> bool {
        match value {
            Value::Object(map) => {
                map.contains_key("__proto__")
                    || matches!(map.get("constructor"), Some(Value::Object(c)) if c.contains_key("prototype"))
                    || map.values().any(forbidden)
            }
            Value::Array(items) => items.iter().any(forbidden),
            _ => false,
        }
    }
    let value: Value = serde_json::from_str(text).ok()?;
    (!forbidden(&value)).then_some(value)
}

/// `parsePartialJson` of `ai`: the value of `text`, or of its repair by [`fix_json`], or `None`.
pub(crate) fn parse_partial_json(text: &str) -> Option<Value> {
    secure_json_parse(text).or_else(|| secure_json_parse(&fix_json(text)))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Root,
    Finish,
    InsideString,
    InsideStringEscape,
    InsideStringUnicodeEscape,
    InsideLiteral,
    InsideNumber,
    InsideObjectStart,
    InsideObjectKey,
    InsideObjectAfterKey,
    InsideObjectBeforeValue,
    InsideObjectAfterValue,
    InsideObjectAfterComma,
    InsideArrayStart,
    InsideArrayAfterValue,
    InsideArrayAfterComma,
}

/// The scanner of `fixJson`. Positions are byte offsets; `last_valid_end` is one past the last
/// valid character (JavaScript's `lastValidIndex + 1`).
struct Fixer<'a> {
    input: &'a str,
    stack: Vec<State>,
    last_valid_end: usize,
    literal_start: usize,
    unicode_escape_digits: u32,
}

impl Fixer<'_> {
    fn top(&self) -> Option<State> {
        self.stack.last().copied()
    }

    fn swap(&mut self, swap_state: State, push: State) {
        self.stack.pop();
        self.stack.push(swap_state);
        self.stack.push(push);
    }

    fn process_value_start(&mut self, c: char, i: usize, end: usize, swap_state: State) {
        match c {
            '"' => {
                self.last_valid_end = end;
                self.swap(swap_state, State::InsideString);
            }
            'f' | 't' | 'n' => {
                self.last_valid_end = end;
                self.literal_start = i;
                self.swap(swap_state, State::InsideLiteral);
            }
            '-' => self.swap(swap_state, State::InsideNumber),
            '0'..='9' => {
                self.last_valid_end = end;
                self.swap(swap_state, State::InsideNumber);
            }
            '{' => {
                self.last_valid_end = end;
                self.swap(swap_state, State::InsideObjectStart);
            }
            '[' => {
                self.last_valid_end = end;
                self.swap(swap_state, State::InsideArrayStart);
            }
            _ => {}
        }
    }

    fn process_after_object_value(&mut self, c: char, end: usize) {
        match c {
            ',' => {
                self.stack.pop();
                self.stack.push(State::InsideObjectAfterComma);
            }
            '}' => {
                self.last_valid_end = end;
                self.stack.pop();
            }
            _ => {}
        }
    }

    fn process_after_array_value(&mut self, c: char, end: usize) {
        match c {
            ',' => {
                self.stack.pop();
                self.stack.push(State::InsideArrayAfterComma);
            }
            ']' => {
                self.last_valid_end = end;
                self.stack.pop();
            }
            _ => {}
        }
    }

    /// One step of the scanner, for one UTF-16 code unit of the character `c` at `i..end`.
    fn step(&mut self, c: char, i: usize, end: usize) {
        let Some(state) = self.top() else { return };
        match state {
            State::Root => self.process_value_start(c, i, end, State::Finish),
            State::InsideObjectStart => match c {
                '"' => {
                    self.stack.pop();
                    self.stack.push(State::InsideObjectKey);
                }
                '}' => {
                    self.last_valid_end = end;
                    self.stack.pop();
                }
                _ => {}
            },
            State::InsideObjectAfterComma => {
                if c == '"' {
                    self.stack.pop();
                    self.stack.push(State::InsideObjectKey);
                }
            }
            State::InsideObjectKey => {
                if c == '"' {
                    self.stack.pop();
                    self.stack.push(State::InsideObjectAfterKey);
                }
            }
            State::InsideObjectAfterKey => {
                if c == ':' {
                    self.stack.pop();
                    self.stack.push(State::InsideObjectBeforeValue);
                }
            }
            State::InsideObjectBeforeValue => {
                self.process_value_start(c, i, end, State::InsideObjectAfterValue)
            }
            State::InsideObjectAfterValue => self.process_after_object_value(c, end),
            State::InsideString => match c {
                '"' => {
                    self.stack.pop();
                    self.last_valid_end = end;
                }
                '\\' => self.stack.push(State::InsideStringEscape),
                _ => self.last_valid_end = end,
            },
            State::InsideArrayStart => {
                if c == ']' {
                    self.last_valid_end = end;
                    self.stack.pop();
                } else {
                    self.last_valid_end = end;
                    self.process_value_start(c, i, end, State::InsideArrayAfterValue);
                }
            }
            State::InsideArrayAfterValue => match c {
                ',' => {
                    self.stack.pop();
                    self.stack.push(State::InsideArrayAfterComma);
                }
                ']' => {
                    self.last_valid_end = end;
                    self.stack.pop();
                }
                _ => self.last_valid_end = end,
            },
            State::InsideArrayAfterComma => {
                self.process_value_start(c, i, end, State::InsideArrayAfterValue)
            }
            State::InsideStringEscape => {
                self.stack.pop();
                if c == 'u' {
                    self.unicode_escape_digits = 0;
                    self.stack.push(State::InsideStringUnicodeEscape);
                } else {
                    self.last_valid_end = end;
                }
            }
            State::InsideStringUnicodeEscape => {
                if c.is_ascii_hexdigit() {
                    self.unicode_escape_digits += 1;
                    if self.unicode_escape_digits == 4 {
                        self.stack.pop();
                        self.last_valid_end = end;
                    }
                }
            }
            State::InsideNumber => match c {
                '0'..='9' => self.last_valid_end = end,
                'e' | 'E' | '-' | '.' => {}
                ',' => {
                    self.stack.pop();
                    if self.top() == Some(State::InsideArrayAfterValue) {
                        self.process_after_array_value(c, end);
                    }
                    if self.top() == Some(State::InsideObjectAfterValue) {
                        self.process_after_object_value(c, end);
                    }
                }
                '}' => {
                    self.stack.pop();
                    if self.top() == Some(State::InsideObjectAfterValue) {
                        self.process_after_object_value(c, end);
                    }
                }
                ']' => {
                    self.stack.pop();
                    if self.top() == Some(State::InsideArrayAfterValue) {
                        self.process_after_array_value(c, end);
                    }
                }
                _ => {
                    self.stack.pop();
                }
            },
            State::InsideLiteral => {
                let partial = self.input.get(self.literal_start..end).unwrap_or("");
                if !"false".starts_with(partial)
                    && !"true".starts_with(partial)
                    && !"null".starts_with(partial)
                {
                    self.stack.pop();
                    if self.top() == Some(State::InsideObjectAfterValue) {
                        self.process_after_object_value(c, end);
                    } else if self.top() == Some(State::InsideArrayAfterValue) {
                        self.process_after_array_value(c, end);
                    }
                } else {
                    self.last_valid_end = end;
                }
            }
            State::Finish => {}
        }
    }
}

/// `fixJson` of `ai`: closes what a truncated JSON text left open, dropping an unfinished tail.
pub(crate) fn fix_json(input: &str) -> String {
    let mut fixer = Fixer {
        input,
        stack: vec![State::Root],
        last_valid_end: 0,
        literal_start: 0,
        unicode_escape_digits: 0,
    };
    for (i, c) in input.char_indices() {
        let end = i + c.len_utf8();
        // JavaScript scans UTF-16 code units: an astral character is two steps.
        for _ in 0..c.len_utf16() {
            fixer.step(c, i, end);
        }
    }
    let mut result = input
        .get(..fixer.last_valid_end)
        .unwrap_or(input)
        .to_owned();
    for state in fixer.stack.iter().rev() {
        match state {
            State::InsideString => result.push('"'),
            State::InsideObjectKey
            | State::InsideObjectAfterKey
            | State::InsideObjectAfterComma
            | State::InsideObjectStart
            | State::InsideObjectBeforeValue
            | State::InsideObjectAfterValue => result.push('}'),
            State::InsideArrayStart
            | State::InsideArrayAfterComma
            | State::InsideArrayAfterValue => result.push(']'),
            State::InsideLiteral => {
                let partial = input.get(fixer.literal_start..).unwrap_or("");
                for literal in ["true", "false", "null"] {
                    if let Some(rest) = literal.strip_prefix(partial) {
                        result.push_str(rest);
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_print_as_javascript_prints_them() {
        let cases = [
            (1e21, "1e+21"),
            (1e-7, "1e-7"),
            (123e-20, "1.23e-18"),
            (0.1, "0.1"),
            (-0.0, "0"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (123456789012345680000.0, "123456789012345680000"),
            (9007199254740994.0, "9007199254740994"),
            (0.000001, "0.000001"),
            (-1.5, "-1.5"),
            (100.0, "100"),
            (0.30000000000000004, "0.30000000000000004"),
            // A tie between two shortest candidates: JavaScript takes the even one.
            (898055860539898.2, "898055860539898.2"),
            (1e22, "1e+22"),
            (1.5e-7, "1.5e-7"),
            (-123.456, "-123.456"),
        ];
        for (x, expected) in cases {
            assert_eq!(number_to_string(x), expected, "{x:e}");
        }
    }

    #[test]
    fn fix_json_closes_what_is_open() {
        let cases = [
            ("", ""),
            ("{", "{}"),
            ("{\"a\":\"b", "{\"a\":\"b\"}"),
            ("{\"a\":1", "{\"a\":1}"),
            ("{\"a\":1.", "{\"a\":1}"),
            ("[tr", "[true]"),
            ("[1,", "[1]"),
            (
                "{\"a\":{\"b\":[1,{\"c\":nu",
                "{\"a\":{\"b\":[1,{\"c\":null}]}}",
            ),
            ("{\"a\":\"\\u00", "{\"a\":\"\"}"),
            ("{\"key", "{}"),
            ("-", ""),
        ];
        for (input, expected) in cases {
            assert_eq!(fix_json(input), expected, "{input}");
        }
    }

    #[test]
    fn partial_json_is_parsed_like_ai() {
        assert_eq!(
            parse_partial_json("{\"city\":\"Pa"),
            Some(json!({"city": "Pa"}))
        );
        assert_eq!(parse_partial_json("{\"__proto__\":{}}"), None);
        assert_eq!(
            parse_partial_json("{\"constructor\":{\"prototype\":1}}"),
            None
        );
        assert_eq!(
            parse_partial_json("{\"constructor\":[1]}"),
            Some(json!({"constructor": [1]}))
        );
        assert_eq!(parse_partial_json("x"), None);
    }

    #[test]
    fn floats_parse_exactly() {
        // Needs serde_json's `float_roundtrip`: without it this digit string parses 1 ulp off.
        let text = "0.8325406392123214";
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(value.as_f64(), text.parse::<f64>().ok());
        assert_eq!(number_to_string(value.as_f64().unwrap()), text);
    }

    #[test]
    fn merge_is_deep_and_throws_like_v8() {
        let merged = merge_objects(
            &json!({"a": {"x": 1}, "b": 2}),
            &json!({"a": {"y": 2}, "c": [1]}),
        )
        .unwrap();
        assert_eq!(merged, json!({"a": {"x": 1, "y": 2}, "b": 2, "c": [1]}));
        assert_eq!(
            merge_objects(&json!(5), &json!({"a": 1})).unwrap_err(),
            "Cannot use 'in' operator to search for 'a' in 5"
        );
        assert_eq!(
            merge_objects(&json!("ab"), &json!(1)).unwrap(),
            json!({"0": "a", "1": "b"})
        );
        assert_eq!(
            merge_objects(&json!({"a": 1}), &json!({"__proto__": 1, "b": 2})).unwrap(),
            json!({"a": 1, "b": 2})
        );
    }
}
