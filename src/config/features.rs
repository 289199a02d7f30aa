//! The features a workload may ask of a runtime beyond plain text, as a
//! suite declares them and as their files are read and compiled before
//! anything runs: structured output (`response_format`: a JSON object, or a
//! JSON Schema from a file) and tool calls (`tools` from a file, with
//! `tool_choice`). What goes in a request body is here; how each answer is
//! marked against them is `measure::features`.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// `response_format` as a suite writes it: `"json_object"`, or
/// `{ schema = "schemas/answer.json" }` (a path from the suite's folder;
/// `name` defaults to the file's stem). A table's unknown keys are refused.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ResponseFormatSpec {
    Named(String),
    Schema(SchemaSpec),
}

/// The table form of [`ResponseFormatSpec`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemaSpec {
    pub schema: std::path::PathBuf,
    #[serde(default)]
    pub name: Option<String>,
}

// By hand rather than `untagged`, so a table's own error (an unknown key, a
// missing `schema`) reaches the user instead of "did not match any variant".
impl<'de> Deserialize<'de> for ResponseFormatSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ResponseFormatSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("\"json_object\" or { schema = \"FILE.json\" }")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(ResponseFormatSpec::Named(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                SchemaSpec::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(ResponseFormatSpec::Schema)
            }
        }
        d.deserialize_any(V)
    }
}

/// A workload's structured-output request, read and compiled: what goes in
/// the body, and what an answer must be.
#[derive(Debug, Clone, PartialEq)]
pub struct StructuredOutput {
    /// The schema's name as sent (`json_schema.name`); None: `json_object`.
    name: Option<String>,
    /// None: `json_object`.
    schema: Option<Schema>,
}

impl StructuredOutput {
    /// `spec` read (a schema path is from `dir`) and checked: `"json_object"`
    /// is the only name; a schema file must hold a JSON Schema (its own
    /// meta-schema says so), whose errors name the file and the place.
    pub fn load(spec: &ResponseFormatSpec, dir: &Path) -> Result<StructuredOutput> {
        match spec {
            ResponseFormatSpec::Named(n) if n == "json_object" => Ok(StructuredOutput {
                name: None,
                schema: None,
            }),
            ResponseFormatSpec::Named(n) => bail!(
                "response_format = {n:?}: the choices are \"json_object\" or {{ schema = \"FILE.json\" }}"
            ),
            ResponseFormatSpec::Schema(SchemaSpec { schema, name }) => {
                let path = dir.join(schema);
                let value = read_json(&path, "response_format.schema")?;
                let name = match name {
                    Some(n) => n.clone(),
                    None => path
                        .file_stem()
                        .and_then(|s| s.to_str())
                        .unwrap_or("schema")
                        .to_string(),
                };
                Self::from_schema(name, value).with_context(|| path.display().to_string())
            }
        }
    }

    /// A JSON Schema given as a value, compiled (an object that its
    /// meta-schema accepts; anything else is refused).
    pub fn from_schema(name: String, schema: Value) -> Result<StructuredOutput> {
        Ok(StructuredOutput {
            name: Some(name),
            schema: Some(Schema::compile(schema)?),
        })
    }

    /// The request body's `response_format` (OpenAI's shape, which
    /// llama.cpp, vLLM and SGLang read).
    pub fn body_field(&self) -> Value {
        match (&self.name, &self.schema) {
            (Some(name), Some(schema)) => json!({
                "type": "json_schema",
                "json_schema": { "name": name, "schema": &*schema.source, "strict": true },
            }),
            _ => json!({ "type": "json_object" }),
        }
    }

    /// Whether an answer's JSON value is what was asked: valid against the
    /// schema, or (`json_object`) an object, not any JSON value.
    pub fn accepts(&self, value: &Value) -> bool {
        match &self.schema {
            Some(schema) => schema.accepts(value),
            None => value.is_object(),
        }
    }
}

/// A JSON Schema as read, and compiled by `boon`. Equal when the schemas
/// read are (the compiled form has no equality of its own).
#[derive(Clone)]
struct Schema {
    source: Arc<Value>,
    compiled: Arc<(boon::Schemas, boon::SchemaIndex)>,
}

impl Schema {
    /// `source` compiled; refused unless it is an object its meta-schema
    /// accepts, with the meta-schema's findings (where it is wrong).
    fn compile(source: Value) -> Result<Schema> {
        if !source.is_object() {
            bail!("not a JSON Schema: a schema is a JSON object, this is {source}");
        }
        let mut schemas = boon::Schemas::new();
        let mut compiler = boon::Compiler::new();
        let url = "urn:infergate:schema";
        compiler
            .add_resource(url, source.clone())
            .map_err(|e| anyhow::anyhow!("not a JSON Schema: {e}"))?;
        let index = compiler.compile(url, &mut schemas).map_err(|e| match e {
            boon::CompileError::ValidationError { src, .. } => {
                anyhow::anyhow!("not a JSON Schema: {src}")
            }
            other => anyhow::anyhow!("not a JSON Schema: {other}"),
        })?;
        refuse_ref_cycles(&schemas, index)?;
        Ok(Schema {
            source: Arc::new(source),
            compiled: Arc::new((schemas, index)),
        })
    }

    fn accepts(&self, value: &Value) -> bool {
        self.compiled.0.validate(value, self.compiled.1).is_ok()
    }
}

/// A `$ref` that reaches itself without reading any of the value
/// (`{"$ref": "#"}`) compiles, then fails every value: found here by
/// validating one value of each JSON type, not after every answer.
fn refuse_ref_cycles(schemas: &boon::Schemas, index: boon::SchemaIndex) -> Result<()> {
    fn cycle(e: &boon::ValidationError) -> Option<String> {
        if let boon::ErrorKind::RefCycle {
            kw_loc1, kw_loc2, ..
        } = &e.kind
        {
            return Some(format!("{kw_loc2} leads back to {kw_loc1}"));
        }
        e.causes.iter().find_map(cycle)
    }
    let probes = [
        json!(null),
        json!({}),
        json!([]),
        json!(""),
        json!(0),
        json!(true),
    ];
    for probe in &probes {
        if let Some(at) = schemas
            .validate(probe, index)
            .err()
            .as_ref()
            .and_then(cycle)
        {
            bail!(
                "not a usable JSON Schema: a $ref cycle that reads nothing of the value ({at}), so no answer could ever be valid"
            );
        }
    }
    Ok(())
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source.fmt(f)
    }
}

impl PartialEq for Schema {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

/// A JSON file's value; a file that is not JSON is named with the line and
/// column where it stops being so.
fn read_json(path: &Path, field: &str) -> Result<Value> {
    let text = crate::config::dataset::read_bounded(path)
        .with_context(|| format!("{field} {}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: line {}, column {}: not JSON: {e}",
            path.display(),
            e.line(),
            e.column()
        )
    })
}

/// `tools` as a suite writes it: `{ file = "tools/answer.json", choice =
/// "required" }`. The file holds OpenAI's `tools` array; `choice` is
/// `"auto"` (the default), `"required"`, or a function's name;
/// `parallel` is sent as `parallel_tool_calls` when given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsSpec {
    pub file: std::path::PathBuf,
    #[serde(default)]
    pub choice: Option<String>,
    #[serde(default)]
    pub parallel: Option<bool>,
}

/// A workload's tools, read and their parameters compiled.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCalling {
    tools: Arc<Value>,
    /// Each function offered: its name and parameters.
    functions: Arc<Vec<(String, Schema)>>,
    choice: String,
    parallel: Option<bool>,
}

impl ToolCalling {
    /// `spec`'s file read (from `dir`) and checked: an array of
    /// `{"type": "function", "function": {"name", "parameters"}}`, names
    /// unique, each `parameters` a JSON Schema (a function that takes none
    /// says so with `{"type": "object", "properties": {}}`); a named
    /// `choice` must be one of them.
    pub fn load(spec: &ToolsSpec, dir: &Path) -> Result<ToolCalling> {
        let path = dir.join(&spec.file);
        let file = path.display().to_string();
        let text = crate::config::dataset::read_bounded(&path)
            .with_context(|| format!("tools.file {file}"))?;
        let tools: Value = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{file}: line {}, column {}: not JSON: {e}",
                e.line(),
                e.column()
            )
        })?;
        let Some(list) = tools.as_array().filter(|l| !l.is_empty()) else {
            bail!("{file}: an array of tools, as OpenAI's `tools`, with at least one");
        };
        let mut functions: Vec<(String, Schema)> = Vec::new();
        for (i, t) in list.iter().enumerate() {
            let at = format!("{file}: tools[{i}]");
            if t.get("type").and_then(Value::as_str) != Some("function") {
                bail!("{at}: field `type` must be \"function\"");
            }
            let Some(name) = t.pointer("/function/name").and_then(Value::as_str) else {
                bail!("{at}: field `function.name`: missing, or not a string");
            };
            if functions.iter().any(|(n, _)| n == name) {
                bail!("{at}: function {name:?} is offered twice");
            }
            let Some(params) = t.pointer("/function/parameters") else {
                bail!(
                    "{at}: field `function.parameters`: missing; a function without arguments says so with {{\"type\": \"object\", \"properties\": {{}}}}"
                );
            };
            let compiled = Schema::compile(params.clone())
                .with_context(|| format!("{at}: field `function.parameters`"))?;
            functions.push((name.to_string(), compiled));
        }
        let choice = spec.choice.clone().unwrap_or_else(|| "auto".into());
        if !matches!(choice.as_str(), "auto" | "required")
            && !functions.iter().any(|(n, _)| *n == choice)
        {
            bail!(
                "field `tools.choice`: {choice:?} is neither \"auto\", \"required\" nor a function {file} offers"
            );
        }
        Ok(ToolCalling {
            tools: Arc::new(tools),
            functions: Arc::new(functions),
            choice,
            parallel: spec.parallel,
        })
    }

    /// The body fields: `tools`, `tool_choice` and, when given,
    /// `parallel_tool_calls` (OpenAI's shapes).
    pub fn body_fields(&self) -> Vec<(&'static str, Value)> {
        let choice = match self.choice.as_str() {
            c @ ("auto" | "required") => Value::from(c),
            name => json!({ "type": "function", "function": { "name": name } }),
        };
        let mut out = vec![("tools", (*self.tools).clone()), ("tool_choice", choice)];
        if let Some(p) = self.parallel {
            out.push(("parallel_tool_calls", Value::Bool(p)));
        }
        out
    }

    /// The place of function `name` in the tools file, if it was offered.
    pub fn offered(&self, name: &str) -> Option<usize> {
        self.functions.iter().position(|(n, _)| n == name)
    }

    /// Whether a call of `name` is one the request allowed: any offered
    /// function under `auto` or `required`, else only the one named.
    pub fn allows(&self, name: &str) -> bool {
        matches!(self.choice.as_str(), "auto" | "required") || name == self.choice
    }

    /// Whether `args` are valid against the parameters of function `index`.
    pub fn arguments_valid(&self, index: usize, args: &Value) -> bool {
        self.functions
            .get(index)
            .is_some_and(|(_, params)| params.accepts(args))
    }
}

/// What the tests of structured output and tool calls share: a schema of
/// one integer `answer`, and a tools file offering `submit_answer` (that
/// answer) and `give_up` (no arguments).
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    pub(crate) fn answer_schema() -> StructuredOutput {
        StructuredOutput::from_schema(
            "answer".into(),
            json!({
                "type": "object",
                "properties": { "answer": { "type": "integer" } },
                "required": ["answer"],
                "additionalProperties": false
            }),
        )
        .unwrap()
    }

    pub(crate) const ANSWER_TOOL: &str = r#"[{"type": "function", "function": {"name": "submit_answer",
        "parameters": {"type": "object", "properties": {"answer": {"type": "integer"}},
        "required": ["answer"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "give_up", "parameters": {"type": "object", "properties": {}}}}]"#;
}

#[cfg(test)]
mod tests {
    use super::fixtures::{ANSWER_TOOL, answer_schema};
    use super::*;

    #[test]
    fn the_body_asks_in_openais_shape() {
        let s = answer_schema();
        let b = s.body_field();
        assert_eq!(b["type"], "json_schema");
        assert_eq!(b["json_schema"]["name"], "answer");
        assert_eq!(b["json_schema"]["schema"]["required"][0], "answer");
        let o = StructuredOutput::load(
            &ResponseFormatSpec::Named("json_object".into()),
            Path::new("."),
        )
        .unwrap();
        assert_eq!(o.body_field(), json!({"type": "json_object"}));
    }

    #[test]
    fn a_file_that_is_not_a_json_schema_is_refused_with_its_name_and_place() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).unwrap();
            ResponseFormatSpec::Schema(SchemaSpec {
                schema: name.into(),
                name: None,
            })
        };
        let bad_json = write("broken.json", "{\n  \"type\": \"object\",\n  oops\n}");
        let e = format!(
            "{:#}",
            StructuredOutput::load(&bad_json, dir.path()).unwrap_err()
        );
        assert!(e.contains("broken.json: line 3"), "{e}");
        let not_schema = write("wrong.json", "{\"type\": \"objekt\"}");
        let e = format!(
            "{:#}",
            StructuredOutput::load(&not_schema, dir.path()).unwrap_err()
        );
        assert!(
            e.contains("wrong.json") && e.contains("not a JSON Schema"),
            "{e}"
        );
        for cyclic in [
            r##"{"$ref": "#"}"##,
            r##"{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}"##,
        ] {
            let spec = write("cycle.json", cyclic);
            let e = format!(
                "{:#}",
                StructuredOutput::load(&spec, dir.path()).unwrap_err()
            );
            assert!(e.contains("cycle.json") && e.contains("$ref cycle"), "{e}");
        }
        // A recursive schema that reads the value as it recurses is fine.
        let tree = write(
            "tree.json",
            r##"{"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}"##,
        );
        assert!(StructuredOutput::load(&tree, dir.path()).is_ok());
        let array = write("array.json", "[1, 2]");
        let e = format!(
            "{:#}",
            StructuredOutput::load(&array, dir.path()).unwrap_err()
        );
        assert!(
            e.contains("array.json") && e.contains("not a JSON Schema"),
            "{e}"
        );
        let named = ResponseFormatSpec::Named("json".into());
        let e = format!(
            "{:#}",
            StructuredOutput::load(&named, dir.path()).unwrap_err()
        );
        assert!(e.contains("json_object"), "{e}");
        let missing = ResponseFormatSpec::Schema(SchemaSpec {
            schema: "absent.json".into(),
            name: None,
        });
        let e = format!(
            "{:#}",
            StructuredOutput::load(&missing, dir.path()).unwrap_err()
        );
        assert!(e.contains("absent.json"), "{e}");
        let fine = write("answer.json", "{\"type\": \"object\"}");
        let ok = StructuredOutput::load(&fine, dir.path()).unwrap();
        assert_eq!(ok.body_field()["json_schema"]["name"], "answer");
    }

    #[test]
    fn a_bad_tools_file_is_refused_with_its_name_and_place() {
        let dir = tempfile::tempdir().unwrap();
        let load = |text: &str, choice: Option<&str>| {
            std::fs::write(dir.path().join("t.json"), text).unwrap();
            let spec = ToolsSpec {
                file: "t.json".into(),
                choice: choice.map(str::to_string),
                parallel: None,
            };
            format!("{:#}", ToolCalling::load(&spec, dir.path()).unwrap_err())
        };
        let e = load(r#"[{"type": "function", "function": {"name": "f"}}]"#, None);
        assert!(
            e.contains("t.json: tools[0]: field `function.parameters`: missing"),
            "{e}"
        );
        let e = load(
            r#"[{"type": "function", "function": {"name": "f", "parameters": {"type": 3}}}]"#,
            None,
        );
        assert!(
            e.contains("tools[0]: field `function.parameters`") && e.contains("not a JSON Schema"),
            "{e}"
        );
        let e = load(r#"{"type": "function"}"#, None);
        assert!(e.contains("an array of tools"), "{e}");
        let e = load(
            r#"[{"type": "function", "function": {"parameters": {}}}]"#,
            None,
        );
        assert!(e.contains("field `function.name`"), "{e}");
        let e = load(ANSWER_TOOL, Some("lookup"));
        assert!(
            e.contains("field `tools.choice`") && e.contains("lookup"),
            "{e}"
        );
        let e = load("[\n  oops", None);
        assert!(e.contains("t.json: line 2"), "{e}");
    }
}
