//! A small checker of bodies against the OpenAPI document's schemas (the subset of JSON Schema
//! utoipa writes: `$ref`, `oneOf`/`anyOf`/`allOf`, `type` (one or several), `enum`,
//! `properties` with `required`, `items`). Undocumented properties are errors.

use reqwest::StatusCode;
use serde_json::Value;

fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.rsplit('/').next().unwrap();
            resolve(doc, &doc["components"]["schemas"][name])
        }
        None => schema,
    }
}

fn type_matches(ty: &str, v: &Value) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        other => panic!("unknown schema type {other}"),
    }
}

/// Errors of `v` against `schema` (a subset of JSON Schema: what utoipa writes).
pub fn check(doc: &Value, schema: &Value, v: &Value, at: &str, errors: &mut Vec<String>) {
    let schema = resolve(doc, schema);
    if let Some(any) = schema.get("oneOf").or(schema.get("anyOf")) {
        let ok = any.as_array().unwrap().iter().any(|s| {
            let mut e = Vec::new();
            check(doc, s, v, at, &mut e);
            e.is_empty()
        });
        if !ok {
            errors.push(format!("{at}: {v} matches none of {any}"));
        }
        return;
    }
    if let Some(all) = schema.get("allOf") {
        for s in all.as_array().unwrap() {
            check(doc, s, v, at, errors);
        }
    }
    match schema.get("type") {
        Some(Value::String(ty)) if !type_matches(ty, v) => {
            errors.push(format!("{at}: {v} is not {ty}"));
            return;
        }
        Some(Value::Array(tys)) if !tys.iter().any(|t| type_matches(t.as_str().unwrap(), v)) => {
            errors.push(format!("{at}: {v} is none of {tys:?}"));
            return;
        }
        _ => {}
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array)
        && !values.contains(v)
    {
        errors.push(format!("{at}: {v} is not one of {values:?}"));
    }
    if let (Some(obj), Some(props)) = (v.as_object(), schema.get("properties")) {
        let props = props.as_object().unwrap();
        for required in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = required.as_str().unwrap();
            if !obj.contains_key(name) {
                errors.push(format!("{at}: required `{name}` missing"));
            }
        }
        for (k, value) in obj {
            match props.get(k) {
                Some(s) => check(doc, s, value, &format!("{at}.{k}"), errors),
                None => errors.push(format!("{at}: `{k}` is not documented")),
            }
        }
    }
    if let (Some(items), Some(schema)) = (v.as_array(), schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            check(doc, schema, item, &format!("{at}[{i}]"), errors);
        }
    }
}

/// Asserts that `status` is documented for `method path` and `body` has its documented shape.
pub fn assert_documented(doc: &Value, method: &str, path: &str, status: StatusCode, body: &Value) {
    let op = &doc["paths"][path][method];
    let response = &op["responses"][status.as_str()];
    assert!(
        response.is_object(),
        "{method} {path} answered {status}, which is not documented: {body}"
    );
    let Some(content) = response["content"].as_object() else {
        return;
    };
    if let Some(media) = content.get("application/json") {
        let mut errors = Vec::new();
        check(doc, &media["schema"], body, "$", &mut errors);
        assert!(
            errors.is_empty(),
            "{method} {path} {status}: {errors:#?}\n{body:#}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The schema checker the route test relies on does catch wrong bodies.
    #[test]
    fn the_schema_checker_catches_wrong_bodies() {
        let doc = json!({"components": {"schemas": {
            "Pause": {"type": "object", "required": ["by"], "properties": {
                "by": {"type": "string"},
                "until": {"type": ["string", "null"]},
            }},
            "Task": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"},
                "pause": {"oneOf": [{"type": "null"}, {"$ref": "#/components/schemas/Pause"}]},
                "runs": {"type": "array", "items": {"type": "integer"}},
            }},
        }}});
        let schema = json!({"$ref": "#/components/schemas/Task"});
        let errors = |v: Value| {
            let mut e = Vec::new();
            check(&doc, &schema, &v, "$", &mut e);
            e
        };
        assert!(errors(json!({"name": "a", "pause": null, "runs": [1]})).is_empty());
        assert!(errors(json!({"name": "a", "pause": {"by": "x", "until": null}})).is_empty());
        assert_eq!(errors(json!({"pause": null})).len(), 1, "required");
        assert_eq!(errors(json!({"name": 1})).len(), 1, "type");
        assert_eq!(
            errors(json!({"name": "a", "extra": 1})).len(),
            1,
            "undocumented"
        );
        assert_eq!(
            errors(json!({"name": "a", "pause": {"until": 3}})).len(),
            1,
            "oneOf"
        );
        assert_eq!(
            errors(json!({"name": "a", "runs": ["x"]})).len(),
            1,
            "items"
        );
    }
}
