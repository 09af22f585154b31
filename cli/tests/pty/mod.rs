//! Running `gapscope` on a terminal in a test: under a pseudo-terminal made by util-linux's
//! `script`, so that stdout and stderr are terminals as they are for a person at one.

use std::process::Command;

/// A word quoted for `sh -c`.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// What a terminal shows for `gapscope ARGS` run in the folder `dir` (else the test's own):
/// stdout and stderr together, lines ending in `\n`, and the exit code. `env` is set for the
/// command (`COLUMNS`, `NO_COLOR`); with `quiet_stderr` stderr goes to /dev/null instead
/// (then it is no terminal: no progress bar, no log colour).
pub fn in_terminal(
    dir: Option<&std::path::Path>,
    args: &[&str],
    env: &[(&str, &str)],
    quiet_stderr: bool,
) -> (String, i32) {
    let bin = gapscope_tests::gapscope().get_program().to_owned();
    let mut line = quoted(bin.to_str().expect("UTF-8 path"));
    for a in args {
        line.push(' ');
        line.push_str(&quoted(a));
    }
    if quiet_stderr {
        line.push_str(" 2>/dev/null");
    }
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &line, "/dev/null"]);
    cmd.env_remove("NO_COLOR").env_remove("COLUMNS");
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().expect(
        "util-linux `script` runs (it gives these tests a terminal; Debian's bsdutils has it)",
    );
    let text = String::from_utf8_lossy(&o.stdout).replace("\r\n", "\n");
    (text, o.status.code().unwrap_or(-1))
}
