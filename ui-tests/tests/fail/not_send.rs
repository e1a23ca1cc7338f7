use std::rc::Rc;

use scheduler::{TaskContext, task};

#[task(name = "syncReport")]
async fn sync_report(_ctx: TaskContext) -> anyhow::Result<()> {
    let counter = Rc::new(1);
    tokio::task::yield_now().await;
    println!("{counter}");
    Ok(())
}

fn main() {}
