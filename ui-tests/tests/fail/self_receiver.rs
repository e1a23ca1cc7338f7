use scheduler::{TaskContext, task};

struct Reports;

impl Reports {
    #[task(name = "syncReport")]
    async fn sync(&self, _ctx: TaskContext) {}
}

fn main() {
    let _ = Reports.sync(TaskContext::standalone("syncReport"));
}
