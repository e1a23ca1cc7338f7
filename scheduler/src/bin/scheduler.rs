//! The `scheduler` command: schedule previews, and status, history, logs, run-now, pause and
//! resume against a deployment's database. The arguments and what each
//! subcommand does live in [`scheduler::cli`], which applications reuse.

fn main() -> std::process::ExitCode {
    scheduler::cli::Cli::main()
}
