"""The command line's one error type, apart from the commands that raise it (so that a
command's module need not import `cli.main`, which imports every command)."""


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 2."""
