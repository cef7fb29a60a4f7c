//! The `transcript-sync` binary: parse arguments, run, print the error chain.

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = transcript_sync::cli::Cli::parse();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .format(|buf, record| {
            let ts = buf.timestamp_millis();
            writeln!(buf, "{ts} {:<5} {}", record.level(), record.args())
        })
        .init();
    match transcript_sync::cli::execute(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("transcript-sync: error: {:#}", anyhow::Error::from(e));
            ExitCode::FAILURE
        }
    }
}
