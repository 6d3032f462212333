"""labgang node agent: NVML inventory (real and simulated), process supervisor, coordinator link."""

from importlib.metadata import PackageNotFoundError, version


def labgang_version() -> str:
    """The installed labgang version (``0+unknown`` when run from a source tree that was never installed).

    The agent, the coordinator and the CLI all report this one value (the link's version
    handshake compares it).
    """
    try:
        return version("labgang")
    except PackageNotFoundError:
        return "0+unknown"
