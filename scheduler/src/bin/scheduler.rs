//! The `scheduler` command: schedule previews for operators. The arguments and what each
//! subcommand does live in [`scheduler::cli`], which applications reuse.

fn main() -> std::process::ExitCode {
    scheduler::cli::Cli::main()
}
