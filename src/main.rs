//! The `transcript-sync` binary: parse arguments, run, print the error chain.

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = transcript_sync::cli::Cli::parse();
    match transcript_sync::cli::execute(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let code = e.exit_code();
            eprintln!(
                "transcript-sync: error: {}",
                transcript_sync::error_chain(&e)
            );
            ExitCode::from(code)
        }
    }
}
