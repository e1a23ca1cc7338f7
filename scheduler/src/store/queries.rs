//! The SQL both backends run as it is, in `queries/*.sql`: statements whose text differs
//! between them in nothing but placeholders are kept once, with PostgreSQL's numbered `$1`,
//! which SQLite (through sqlx) binds as the same numbered parameter. What a backend runs of its
//! own (another dialect, another representation) stays in its `queries/`.

/// The text of `store/queries/<name>.sql`, included at compile time.
macro_rules! shared_query {
    ($file:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/store/queries/",
            $file,
            ".sql"
        ))
    };
}

/// A statement assembled once, at its first use, from the text `$text` of a `queries/` file by
/// `$assemble` (a `fn(&str) -> String`), as a `&'static str`.
macro_rules! assembled_query {
    ($assemble:path, $text:expr) => {{
        static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| $assemble($text));
        SQL.as_str()
    }};
}

/// A statement returning run records (a SELECT, or an UPDATE's RETURNING), `$text` (a backend's
/// `query!("...")`), with its `-- @include run_columns.sql` line replaced by the columns every
/// run record is read from (`store/queries/run_columns.sql`, decoded by `RunRecord::read`):
/// a column added to the runs is listed there once, for every such statement of both backends.
macro_rules! runs_select {
    ($text:expr) => {
        assembled_query!(crate::store::queries::with_run_columns, $text)
    };
}

/// A SELECT of due tasks for a claim, `$text` (a backend's `query!("...")`), with its
/// `-- @include due_columns.sql` line replaced by the columns a due task is read from
/// (`store/queries/due_columns.sql`, decoded by `records::due_task`; the row is aliased `task`).
macro_rules! due_select {
    ($text:expr) => {
        assembled_query!(crate::store::queries::with_due_columns, $text)
    };
}

/// A SELECT of task states (`records::task_state` decodes them), `$text` (a backend's
/// `query!("...")`), with its `-- @include task_state_columns.sql` line replaced by the columns
/// a task's state is read from (`store/queries/task_state_columns.sql`): a column added to the
/// state is listed there once, for every such statement of both backends.
macro_rules! task_state_select {
    ($text:expr) => {
        assembled_query!(crate::store::queries::with_task_state_columns, $text)
    };
}

/// `statement` with its line `-- @include <name>` replaced by `text` (which carries its own
/// indentation).
///
/// # Panics
///
/// If `statement` has no such line: a statement that names an include always has it, so the
/// first use of the statement (in any test of it) fails.
pub(crate) fn include(statement: &str, name: &str, text: &str) -> String {
    let marker = format!("-- @include {name}\n");
    let at = statement
        .find(&marker)
        .unwrap_or_else(|| panic!("the statement includes {name}:\n{statement}"));
    let line = statement[..at].rfind('\n').map_or(0, |i| i + 1);
    format!(
        "{}{text}{}",
        &statement[..line],
        &statement[at + marker.len()..]
    )
}

/// `statement` with a due task's columns included (see `due_select!`).
pub(crate) fn with_due_columns(statement: &str) -> String {
    include(statement, "due_columns.sql", shared_query!("due_columns"))
}

/// `statement` with the run record's columns included (see `runs_select!`).
pub(crate) fn with_run_columns(statement: &str) -> String {
    include(statement, "run_columns.sql", shared_query!("run_columns"))
}

/// `statement` with a task state's columns included (see `task_state_select!`).
pub(crate) fn with_task_state_columns(statement: &str) -> String {
    include(
        statement,
        "task_state_columns.sql",
        shared_query!("task_state_columns"),
    )
}

/// `instance_summaries.sql` for one task (`$1`): its `-- @include one_task` and
/// `one_task_latest` lines made conditions on `instance_of`, so the read finds that task's
/// instances, and its latest one, by their index instead of reading every task's.
pub(crate) fn one_task_instance_summaries(statement: &str) -> String {
    let grouped = include(statement, "one_task", "      AND instance_of = $1\n");
    include(&grouped, "one_task_latest", " AND t.instance_of = $1\n")
}
