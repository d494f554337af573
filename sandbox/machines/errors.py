"""The one exception type the CLI turns into a clear message and exit status 1."""


class SandboxError(Exception):
    pass
