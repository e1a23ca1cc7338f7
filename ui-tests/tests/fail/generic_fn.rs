use scheduler::task;

#[task(name = "syncReport")]
async fn sync_report<T: Default>() {
    let _ = T::default();
}

fn main() {}
