//! Terminal concerns: colour choice (flag, NO_COLOR, TTY), logging setup, error printing, and
//! a reader that stops reading (`cotal audit | head -1`).

use super::ColorChoice;
use crate::error::Error;
use std::io::IsTerminal;

pub fn colour_enabled(choice: ColorChoice) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && std::io::stdout().is_terminal()
        }
    }
}

pub fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    // async-nats logs an expected refusal (the data-plane check of a removed space) as an
    // error; it is only shown when asked for.
    let default = match verbose {
        0 => "warn,async_nats=off",
        1 => "cotal=info",
        2 => "cotal=debug,async_nats=info",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

pub fn print_error(e: &Error, colour: bool) {
    let label = console::Style::new()
        .red()
        .bold()
        .force_styling(colour && std::io::stderr().is_terminal());
    eprintln!("{} {e}", label.apply_to("error:"));
}

/// A reader that closed the pipe (`cotal audit | head -1`) ends the process quietly with exit
/// 0: Rust's `print!` panics on a broken pipe, and SIGPIPE stays ignored (restoring its default
/// would also kill cotal when the broker closes a socket under it). Any other failure to write
/// the output is an error (exit 1) said in one line; any other panic is reported as usual.
pub fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if payload.contains("Broken pipe") {
            std::process::exit(0);
        }
        // Any other failure to write the output (a full disk, /dev/full): an error, not a
        // panic.
        if payload.starts_with("failed printing to std") || payload.starts_with("failed to write") {
            eprintln!("error: cannot write the output: {payload}");
            std::process::exit(crate::error::exit::ERROR);
        }
        default(info);
    }));
}
