"""The ``gapscope`` command installed with the package: the CLI's own program (the Rust
library the ``gapscope`` binary runs), so output and exit codes are the binary's."""
from __future__ import annotations

import signal
import sys


def main() -> None:
    from ._native import cli_main

    # The command runs outside the interpreter's loop: let Ctrl-C stop it as it stops the
    # binary, and a closed pipe end it quietly.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(cli_main(["gapscope", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
