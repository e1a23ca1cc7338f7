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
