use serde_json::{json, Value};

use super::*;

/// The items of `value` (an array) as the binding receives them.
fn raw(value: &Value) -> Vec<Box<RawValue>> {
    serde_json::from_str(&value.to_string()).unwrap()
}

fn ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("m{i}")).collect()
}

fn read(value: Value) -> Result<Vec<Value>> {
    let items = raw(&value);
    let messages = read_history(&items, &ids(items.len()))?;
    Ok(messages.iter().map(StoredMessage::to_value).collect())
}

/// The path of the error `value` is refused with, and its message.
fn refusal(value: Value) -> (String, String) {
    match read(value) {
        Err(SessionError::Input { path, message }) => (path, message),
        other => panic!("expected an input error, got {other:?}"),
    }
}

fn user(text: &str) -> Value {
    json!({ "type": "user", "text": text })
}

fn call(id: &str) -> Value {
    json!({ "type": "tool_call", "callId": id, "name": "lookup", "arguments": { "name": "Atlas" } })
}

fn result(id: &str) -> Value {
    json!({ "type": "tool_result", "callId": id, "output": "{\"available\":false}" })
}

#[test]
fn a_transcript_becomes_ui_messages() {
    let messages = read(json!([
        user("Check Atlas."),
        call("a"),
        result("a"),
        { "type": "assistant", "text": "Atlas is taken." },
        user("Thanks"),
    ]))
    .unwrap();
    assert_eq!(
        Value::Array(messages),
        json!([
            { "id": "m0", "role": "user", "parts": [{ "type": "text", "text": "Check Atlas." }] },
            { "id": "m1", "role": "assistant", "parts": [
                { "type": "step-start" },
                { "type": "tool-lookup", "toolCallId": "a", "state": "output-available",
                  "input": { "name": "Atlas" }, "output": "{\"available\":false}" },
                { "type": "step-start" },
                { "type": "text", "text": "Atlas is taken.", "state": "done" },
            ] },
            { "id": "m2", "role": "user", "parts": [{ "type": "text", "text": "Thanks" }] },
        ])
    );
    assert!(read(json!([])).unwrap().is_empty());
}

#[test]
fn every_rule_is_refused_naming_the_item() {
    let cases = [
        (
            json!([{ "type": "assistant", "text": "hi" }]),
            "initialHistory[0].type",
            "starts with a user item",
        ),
        (
            json!([user("a"), call("a")]),
            "initialHistory[1]",
            "has no result",
        ),
        (
            json!([user("a"), call("a"), user("b"), result("a")]),
            "initialHistory[1]",
            "before the next user item",
        ),
        (
            json!([user("a"), result("a")]),
            "initialHistory[1].callId",
            "follows its call",
        ),
        (
            json!([user("a"), result("a"), call("a")]),
            "initialHistory[1].callId",
            "follows its call",
        ),
        (
            json!([user("a"), call("a"), result("a"), result("a")]),
            "initialHistory[3].callId",
            "has a result already",
        ),
        (
            json!([user("a"), call("a"), result("a"), call("a"), result("a")]),
            "initialHistory[3].callId",
            "already the id",
        ),
        (
            json!([user("a"), { "type": "tool_call", "callId": "a", "name": "x", "arguments": [1] }, result("a")]),
            "initialHistory[1].arguments",
            "must be an object",
        ),
        (
            json!([user("a"), { "type": "tool_call", "callId": "a", "name": "x", "arguments": "{}" }, result("a")]),
            "initialHistory[1].arguments",
            "must be an object",
        ),
        (
            json!([user("a"), { "type": "tool_call", "callId": "", "name": "x", "arguments": {} }]),
            "initialHistory[1].callId",
            "nonempty",
        ),
        (
            json!([user("a"), { "type": "tool_call", "callId": "a", "arguments": {} }]),
            "initialHistory[1].name",
            "nonempty",
        ),
        (
            json!([user("a"), { "type": "tool_result", "callId": "a" }]),
            "initialHistory[1].output",
            "missing",
        ),
        (
            json!([{ "type": "system", "text": "a" }]),
            "initialHistory[0].type",
            "must be",
        ),
        (
            json!([{ "text": "a" }]),
            "initialHistory[0].type",
            "must be",
        ),
        (
            json!([{ "type": "user", "text": 3 }]),
            "initialHistory[0].text",
            "must be a string",
        ),
        (
            json!([{ "type": "user", "text": "a", "image": "x" }]),
            "initialHistory[0].image",
            "no field",
        ),
        (json!(["hello"]), "initialHistory[0]", "must be an object"),
        (
            json!([user("a"), { "type": "assistant", "text": 1 }]),
            "initialHistory[1].text",
            "must be a string",
        ),
    ];
    for (transcript, path, rule) in cases {
        let (at, message) = refusal(transcript.clone());
        assert_eq!(at, path, "{transcript}");
        assert!(message.starts_with(&format!("{path}: ")), "{message}");
        assert!(message.contains(rule), "{message} should say {rule:?}");
    }
}

#[test]
fn a_lone_surrogate_is_not_text() {
    let items: Vec<Box<RawValue>> =
        serde_json::from_str(r#"[{"type":"user","text":"a\ud800b"}]"#).unwrap();
    match read_history(&items, &ids(1)) {
        Err(SessionError::Input { path, message }) => {
            assert_eq!(path, "initialHistory[0].text");
            assert!(message.contains("lone surrogate"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_number_of_items_is_bounded() {
    let mut items = vec![user("a")];
    items.extend((1..MOST_ITEMS).map(|_| json!({ "type": "assistant", "text": "b" })));
    assert_eq!(read(Value::Array(items.clone())).unwrap().len(), 2);
    items.push(user("c"));
    assert_eq!(refusal(Value::Array(items)).0, "initialHistory[256]");
}

#[test]
fn each_text_arguments_and_output_is_bounded() {
    let at = "é".repeat(MOST_ITEM_BYTES / 2);
    assert!(read(json!([user(&at)])).is_ok());
    let past = format!("{at}a");
    assert_eq!(refusal(json!([user(&past)])).0, "initialHistory[0].text");

    // `{"k":"…"}` is 8 bytes of JSON around the text.
    let arguments = |n: usize| json!({ "k": "a".repeat(n - 8) });
    let with_arguments = |n: usize| json!([user("a"), { "type": "tool_call", "callId": "c", "name": "x", "arguments": arguments(n) }, result("c")]);
    assert!(read(with_arguments(MOST_ITEM_BYTES)).is_ok());
    assert_eq!(
        refusal(with_arguments(MOST_ITEM_BYTES + 1)).0,
        "initialHistory[1].arguments"
    );

    let with_output = |output: Value| json!([user("a"), call("c"), { "type": "tool_result", "callId": "c", "output": output }]);
    assert!(read(with_output(json!("a".repeat(MOST_ITEM_BYTES)))).is_ok());
    assert_eq!(
        refusal(with_output(json!("a".repeat(MOST_ITEM_BYTES + 1)))).0,
        "initialHistory[2].output"
    );
    assert!(read(with_output(json!(["a".repeat(MOST_ITEM_BYTES - 4)]))).is_ok());
    assert!(read(with_output(json!(["a".repeat(MOST_ITEM_BYTES - 3)]))).is_err());
}

#[test]
fn the_whole_transcript_is_bounded() {
    let half = "a".repeat(MOST_ITEM_BYTES);
    assert!(read(json!([user(&half), user(&half), user("")])).is_ok());
    let (path, message) = refusal(json!([user(&half), user(&half), user("a")]));
    assert_eq!(path, "initialHistory[2]");
    assert!(message.contains("in all"), "{message}");
}

#[test]
fn nesting_is_bounded_even_past_what_the_parser_reads() {
    let nested = |levels: usize| {
        let mut value = json!({});
        for _ in 1..levels {
            value = json!({ "a": value });
        }
        value
    };
    let with_arguments = |arguments: String| {
        format!(
            r#"[{{"type":"user","text":"a"}},{{"type":"tool_call","callId":"c","name":"x","arguments":{arguments}}},{{"type":"tool_result","callId":"c","output":"ok"}}]"#
        )
    };
    let items: Vec<Box<RawValue>> =
        serde_json::from_str(&with_arguments(nested(MOST_NESTING).to_string())).unwrap();
    assert!(read_history(&items, &ids(3)).is_ok());
    let items: Vec<Box<RawValue>> =
        serde_json::from_str(&with_arguments(nested(MOST_NESTING + 1).to_string())).unwrap();
    assert!(read_history(&items, &ids(3)).is_err());
    // Deeper than serde_json reads into values: still a clear error naming the field.
    let deep = format!(
        "{}{}",
        "{\"a\":".repeat(5000),
        "1".to_owned() + &"}".repeat(5000)
    );
    let items: Vec<Box<RawValue>> = serde_json::from_str(&with_arguments(deep)).unwrap();
    match read_history(&items, &ids(3)) {
        Err(SessionError::Input { path, .. }) => assert_eq!(path, "initialHistory[1].arguments"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_transcript_reads_as_words() {
    let messages = read_history(
        &raw(&json!([user("Check Atlas."), call("a"), result("a"), { "type": "assistant", "text": "Taken." }])),
        &ids(4),
    )
    .unwrap();
    let prompt = with_transcript(&messages, "And Borealis?");
    assert!(prompt.contains("User: Check Atlas.\nTool call lookup({\"name\":\"Atlas\"}) → {\"available\":false}\nAssistant: Taken."), "{prompt}");
    assert!(
        prompt.ends_with("</imported-conversation>\n\nAnd Borealis?"),
        "{prompt}"
    );
    assert_eq!(with_transcript(&[], "hi"), "hi");
}

#[test]
fn the_mark_is_a_field_of_the_record() {
    let mut extra = Map::new();
    assert!(!is_pending(&extra));
    mark_pending(&mut extra, true);
    assert_eq!(
        Value::Object(extra.clone()),
        json!({ "importPending": true })
    );
    assert!(is_pending(&extra));
    mark_pending(&mut extra, false);
    assert!(extra.is_empty());
}
