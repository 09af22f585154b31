//! `gapscope`: where a decode step's time goes, and how far it is from what the GPU allows.
//! The program is the library [`gapscope_cli`], which the Python module's command runs too.

fn main() -> std::process::ExitCode {
    gapscope_cli::main(std::env::args_os())
}
