//! Structured answers: `send(id, { message, output: { schema, name?, description? } })`.
//!
//! The schema (JSON Schema, draft 2020-12 unless it names another with `$schema`) is compiled when
//! the turn is asked for, so that a schema that is not one is refused before anything changes. The
//! agent is told, after the prompt, to end its answer with one JSON value matching it: guidance,
//! not constrained generation. At the end of the turn the JSON candidates of the reply's final text
//! are validated, and the first valid one is the turn's answer; a turn is never run again to repair
//! one.
//!
//! The final text is the text of the reply's last step (its text parts after the last
//! `step-start`). Its candidates are the whole text when it is one JSON value; otherwise every
//! fenced code block (```` ```json ```` or ```` ``` ````) that holds JSON, and every balanced
//! `{...}` or `[...]` outside the fences that parses as JSON. They are tried from the last to the
//! first (the agent is told to end with its answer); the errors reported for an answer with no
//! valid candidate are those of the last candidate.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::engine::error::{Result, SessionError};
use crate::engine::ui::UiChunk;

/// The largest schema, in bytes of JSON: it is told to the agent with every prompt that asks it.
pub const MOST_SCHEMA_BYTES: usize = 100_000;
/// The longest `name`, in UTF-8 bytes.
pub const MOST_NAME_BYTES: usize = 200;
/// The longest `description`, in UTF-8 bytes.
pub const MOST_DESCRIPTION_BYTES: usize = 32_000;
/// The most validation errors an invalid answer reports.
const MOST_ERRORS: usize = 50;

/// The structured answer a turn is asked for: its schema, compiled.
#[derive(Clone)]
pub struct OutputSpec {
    /// The JSON Schema, as given.
    pub schema: Value,
    /// What the answer is called, told to the agent.
    pub name: Option<String>,
    /// What the answer is, told to the agent.
    pub description: Option<String>,
    validator: Arc<jsonschema::Validator>,
}

impl std::fmt::Debug for OutputSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputSpec")
            .field("schema", &self.schema)
            .field("name", &self.name)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

/// What `output` is given as, before it is checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputArgs {
    schema: Option<Value>,
    name: Option<Value>,
    description: Option<Value>,
}

/// Reads `output` (`None` or `null`: no structured answer asked).
///
/// # Errors
/// [`SessionError::Input`] naming `output`, `output.schema`, `output.name` or
/// `output.description`: a schema that is not valid JSON Schema is refused here.
pub fn read(output: Option<Value>) -> Result<Option<OutputSpec>> {
    let output = match output {
        None | Some(Value::Null) => return Ok(None),
        Some(output @ Value::Object(_)) => output,
        Some(_) => {
            return Err(SessionError::input(
                "output",
                "output must be { schema, name?, description? }",
            ))
        }
    };
    let args: OutputArgs = serde_json::from_value(output).map_err(|e| {
        SessionError::input(
            "output",
            format!("output must be {{ schema, name?, description? }}: {e}"),
        )
    })?;
    let schema = match args.schema {
        Some(schema @ (Value::Object(_) | Value::Bool(_))) => schema,
        _ => {
            return Err(SessionError::input(
                "output.schema",
                "output.schema must be a JSON Schema (an object or a boolean)",
            ))
        }
    };
    let size = serde_json::to_string(&schema).map_or(usize::MAX, |text| text.len());
    if size > MOST_SCHEMA_BYTES {
        return Err(SessionError::input(
            "output.schema",
            format!("output.schema must be at most {MOST_SCHEMA_BYTES} bytes of JSON"),
        ));
    }
    let name = text_option(args.name, "output.name", MOST_NAME_BYTES)?;
    let description = text_option(
        args.description,
        "output.description",
        MOST_DESCRIPTION_BYTES,
    )?;
    let validator = compile(&schema)?;
    Ok(Some(OutputSpec {
        schema,
        name,
        description,
        validator: Arc::new(validator),
    }))
}

/// Compiles `schema` (draft 2020-12 unless it says otherwise; no reference is fetched).
fn compile(schema: &Value) -> Result<jsonschema::Validator> {
    let compiled = std::panic::catch_unwind(|| {
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(schema)
            .map_err(|e| e.to_string())
    });
    match compiled {
        Ok(Ok(validator)) => Ok(validator),
        Ok(Err(reason)) => Err(SessionError::input(
            "output.schema",
            format!("output.schema is not a valid JSON Schema: {reason}"),
        )),
        Err(_) => Err(SessionError::input(
            "output.schema",
            "output.schema is not a valid JSON Schema",
        )),
    }
}

/// A string option of at most `most` bytes, without NUL.
fn text_option(value: Option<Value>, path: &str, most: usize) -> Result<Option<String>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.len() <= most && !text.contains('\0') => Ok(Some(text)),
        Some(_) => Err(SessionError::input(
            path,
            format!("{path} must be a string of at most {most} UTF-8 bytes, without NUL"),
        )),
    }
}

/// What became of the structured answer of a turn.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputVerdict {
    /// The first valid candidate.
    Valid(Value),
    /// Candidates, none valid: the errors of the last one.
    Invalid(Vec<OutputProblem>),
    /// No JSON in the final text.
    Missing,
    /// The turn paused awaiting input: its answer is not given yet.
    Pending,
}

/// One validation error: where in the candidate, and what.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputProblem {
    /// The JSON Pointer of the value at fault in the candidate (`""` for the whole).
    pub instance_path: String,
    /// What is wrong with it.
    pub message: String,
}

impl OutputSpec {
    /// What the agent is told after the prompt.
    pub fn guidance(&self) -> String {
        let schema = serde_json::to_string_pretty(&self.schema).unwrap_or_default();
        let mut what = String::from("End your answer with one JSON value");
        if let Some(name) = self.name.as_deref() {
            what.push_str(&format!(" named \"{name}\""));
        }
        what.push_str(
            " matching the JSON Schema below, in a ```json fenced code block, and nothing after it.",
        );
        if let Some(description) = self.description.as_deref() {
            what.push_str(&format!("\nWhat the value is: {description}"));
        }
        format!("<answer-format>\n{what}\n\n```json\n{schema}\n```\n</answer-format>")
    }

    /// Judges the reply `message` of a turn that ended.
    pub fn judge(&self, message: &Value) -> OutputVerdict {
        let text = final_text(message);
        let candidates = candidates(&text);
        let Some(last) = candidates.last() else {
            return OutputVerdict::Missing;
        };
        for candidate in candidates.iter().rev() {
            if self.validator.is_valid(candidate) {
                return OutputVerdict::Valid(candidate.clone());
            }
        }
        let problems = self
            .validator
            .iter_errors(last)
            .take(MOST_ERRORS)
            .map(|error| OutputProblem {
                instance_path: error.instance_path().as_str().to_owned(),
                message: error.masked().to_string(),
            })
            .collect();
        OutputVerdict::Invalid(problems)
    }
}

impl OutputVerdict {
    /// What the reply's `metadata` keep of it: `output` (the value) or `outputError`; nothing
    /// while it is pending.
    pub fn metadata(&self) -> Option<(&'static str, Value)> {
        match self {
            OutputVerdict::Valid(value) => Some(("output", value.clone())),
            OutputVerdict::Pending => None,
            _ => Some(("outputError", self.error_json())),
        }
    }

    /// The verdict as `turn.output` settles with it: `{ value }`, or `{ code, message, errors }`.
    pub fn to_json(&self) -> Value {
        match self {
            OutputVerdict::Valid(value) => json!({ "value": value }),
            _ => self.error_json(),
        }
    }

    fn error_json(&self) -> Value {
        let (code, message, errors) = match self {
            OutputVerdict::Valid(_) => return Value::Null,
            OutputVerdict::Invalid(problems) => (
                "output_invalid",
                "The answer's JSON does not match the output schema.",
                problems
                    .iter()
                    .map(|p| json!({ "instancePath": p.instance_path, "message": p.message }))
                    .collect(),
            ),
            OutputVerdict::Missing => (
                "output_missing",
                "The answer holds no JSON value.",
                Vec::new(),
            ),
            OutputVerdict::Pending => (
                "output_pending",
                "The turn paused awaiting input before it answered: pass output again to continue().",
                Vec::new(),
            ),
        };
        json!({ "code": code, "message": message, "errors": errors })
    }
}

/// Sets `metadata[key] = value` on `message`, keeping the metadata it has.
pub fn put_metadata(message: &mut Value, key: &str, value: Value) {
    let Some(object) = message.as_object_mut() else {
        return;
    };
    match object.get_mut("metadata") {
        Some(Value::Object(metadata)) => {
            metadata.insert(key.into(), value);
        }
        _ => {
            let mut metadata = Map::new();
            metadata.insert(key.into(), value);
            object.insert("metadata".into(), Value::Object(metadata));
        }
    }
}

/// The `message-metadata` chunk that shows `metadata[key] = value` to a reply's readers.
pub fn metadata_chunk(key: &str, value: Value) -> Option<UiChunk> {
    let mut metadata = Map::new();
    metadata.insert(key.into(), value);
    UiChunk::from_value(json!({ "type": "message-metadata", "messageMetadata": metadata })).ok()
}

/// The text of the last step of `message`: its text parts after the last `step-start`, joined.
pub fn final_text(message: &Value) -> String {
    let Some(parts) = message.get("parts").and_then(Value::as_array) else {
        return String::new();
    };
    let from = parts
        .iter()
        .rposition(|p| p.get("type").and_then(Value::as_str) == Some("step-start"))
        .map_or(0, |i| i + 1);
    parts[from..]
        .iter()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The JSON values of `text`, in the order they appear: see the module's documentation.
pub fn candidates(text: &str) -> Vec<Value> {
    if let Ok(whole) = serde_json::from_str::<Value>(text.trim()) {
        return vec![whole];
    }
    let mut found: Vec<(usize, Value)> = Vec::new();
    let mut outside = String::with_capacity(text.len());
    let mut rest = 0;
    // Fenced blocks: their JSON is a candidate, and they are blanked for the scan of spans.
    while let Some(open) = text[rest..].find("```").map(|i| rest + i) {
        let Some(line_end) = text[open..].find('\n').map(|i| open + i + 1) else {
            break;
        };
        let Some(close) = text[line_end..].find("```").map(|i| line_end + i) else {
            break;
        };
        if let Ok(value) = serde_json::from_str::<Value>(text[line_end..close].trim()) {
            found.push((open, value));
        }
        outside.push_str(&text[rest..open]);
        outside.extend(std::iter::repeat_n(' ', close + 3 - open));
        rest = close + 3;
    }
    outside.push_str(&text[rest..]);
    found.extend(spans(&outside));
    found.sort_by_key(|(at, _)| *at);
    found.into_iter().map(|(_, value)| value).collect()
}

/// The most bytes the scan for spans reads, over all its attempts: a text of many brackets
/// that never close costs no more than this.
const MOST_SCAN_STEPS: usize = 20_000_000;

/// The balanced `{...}` and `[...]` of `text` that parse as JSON, each with where it starts; a
/// span that does not parse is looked into for ones that do.
fn spans(text: &str) -> Vec<(usize, Value)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    let mut budget = MOST_SCAN_STEPS;
    while at < bytes.len() {
        if matches!(bytes[at], b'{' | b'[') {
            if let Some(end) = balanced_end(bytes, at, &mut budget) {
                if let Ok(value) = serde_json::from_str::<Value>(&text[at..end]) {
                    found.push((at, value));
                    at = end;
                    continue;
                }
            }
        }
        at += 1;
    }
    found
}

/// Where the bracket opened at `start` is closed (one past it), strings skipped; `None` when it
/// is not, or the `budget` of bytes to read runs out.
fn balanced_end(bytes: &[u8], start: usize, budget: &mut usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &byte) in bytes.iter().enumerate().skip(start) {
        *budget = budget.checked_sub(1)?;
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(schema: Value) -> OutputSpec {
        read(Some(json!({ "schema": schema }))).unwrap().unwrap()
    }

    fn reply(text: &str) -> Value {
        json!({ "id": "r", "role": "assistant", "parts": [
            { "type": "step-start" },
            { "type": "text", "text": "thinking {\"title\": 1}" },
            { "type": "step-start" },
            { "type": "text", "text": text },
        ]})
    }

    #[test]
    fn bad_output_options_are_refused_naming_the_field() {
        let path = |output: Value| match read(Some(output)) {
            Err(SessionError::Input { path, .. }) => path,
            other => panic!("not refused: {other:?}"),
        };
        assert_eq!(path(json!(3)), "output");
        assert_eq!(path(json!({ "schema": {}, "other": 1 })), "output");
        assert_eq!(path(json!({})), "output.schema");
        assert_eq!(path(json!({ "schema": "string" })), "output.schema");
        assert_eq!(
            path(json!({ "schema": { "type": "nope" } })),
            "output.schema"
        );
        assert_eq!(
            path(json!({ "schema": { "minimum": "one" } })),
            "output.schema"
        );
        assert_eq!(path(json!({ "schema": {}, "name": 3 })), "output.name");
        assert_eq!(
            path(json!({ "schema": {}, "description": "a\0" })),
            "output.description"
        );
        assert!(read(None).unwrap().is_none());
        assert!(read(Some(json!({ "schema": true }))).unwrap().is_some());
    }

    #[test]
    fn candidates_are_fences_and_balanced_spans_in_order() {
        let text =
            "Here [not json] is {\"a\": 1} and\n```json\n{\"b\": [2]}\n```\nthen [3, 4] end {";
        assert_eq!(
            candidates(text),
            vec![json!({ "a": 1 }), json!({ "b": [2] }), json!([3, 4])]
        );
        assert_eq!(
            candidates(" \"just a string\" "),
            vec![json!("just a string")]
        );
        assert_eq!(candidates("no json here"), Vec::<Value>::new());
        assert_eq!(
            candidates("a brace in a string {\"s\": \"}{\"}"),
            vec![json!({ "s": "}{" })]
        );
    }

    #[test]
    fn the_last_valid_candidate_of_the_last_step_wins() {
        let spec = spec(json!({
            "type": "object",
            "properties": { "title": { "type": "string" } },
            "required": ["title"],
        }));
        let verdict = spec.judge(&reply(
            "First {\"title\": \"draft\"} then {\"title\": \"final\"} and {\"other\": 1}",
        ));
        assert_eq!(verdict, OutputVerdict::Valid(json!({ "title": "final" })));
        // The earlier step's JSON is not part of the final text.
        assert_eq!(spec.judge(&reply("nothing")), OutputVerdict::Missing);
        let OutputVerdict::Invalid(problems) = spec.judge(&reply("{\"title\": 5}")) else {
            panic!("not invalid");
        };
        assert_eq!(problems[0].instance_path, "/title");
        assert!(!problems[0].message.is_empty());
        assert_eq!(spec.judge(&json!({ "parts": [] })), OutputVerdict::Missing);
    }

    #[test]
    fn schemas_that_refer_to_themselves_neither_hang_nor_overflow() {
        for schema in [
            json!({ "$ref": "#" }),
            json!({ "$defs": { "a": { "$ref": "#/$defs/a" } }, "$ref": "#/$defs/a" }),
            json!({ "$defs": { "a": { "anyOf": [{ "$ref": "#/$defs/b" }] }, "b": { "$ref": "#/$defs/a" } }, "$ref": "#/$defs/a" }),
            json!({ "$ref": "https://example.com/schema.json" }),
        ] {
            if let Ok(Some(spec)) = read(Some(json!({ "schema": schema }))) {
                let _ = spec.judge(&reply("{\"title\": 1}"));
            }
        }
        assert!(read(Some(
            json!({ "schema": { "$ref": "https://example.com/s.json" } })
        ))
        .is_err());
    }

    #[test]
    fn verdicts_become_metadata_and_settlements() {
        let valid = OutputVerdict::Valid(json!(1));
        assert_eq!(valid.metadata(), Some(("output", json!(1))));
        assert_eq!(valid.to_json(), json!({ "value": 1 }));
        assert_eq!(OutputVerdict::Pending.metadata(), None);
        assert_eq!(OutputVerdict::Missing.to_json()["code"], "output_missing");
        let mut message = json!({ "metadata": { "cut": "x" } });
        put_metadata(&mut message, "output", json!(2));
        assert_eq!(message["metadata"], json!({ "cut": "x", "output": 2 }));
        assert!(spec(json!(true)).guidance().contains("```json\ntrue\n```"));
    }
}
