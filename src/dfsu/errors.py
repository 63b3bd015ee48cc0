"""The one exception the command line turns into a one-line error and a non-zero exit."""


class DfsuError(Exception):
    """A user-facing error: bad input, a missing file, a wrong config value.

    The message names the file/row/key and the reason; the CLI prints it without a traceback.
    """
