use scheduler::{TaskContext, task};

#[derive(Debug, thiserror::Error)]
enum ReportError {
    #[error("advertiser {0} not found")]
    NotFound(u64),
}

#[task(name = "customError")]
async fn custom_error(_ctx: TaskContext) -> Result<(), ReportError> {
    Err(ReportError::NotFound(7))
}

// Compiling is the test: there is nothing to run.
