use scheduler::{TaskContext, task};

#[task(name = "syncReport")]
async fn sync_report(_name: String) {}

#[task(name = "syncBorrowed")]
async fn sync_borrowed(_ctx: &TaskContext) {}

fn main() {}
