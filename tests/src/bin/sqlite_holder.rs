// TEMP-SQLITE: restored when the SQLite store is back
fn main() {}
