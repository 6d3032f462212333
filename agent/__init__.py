"""labgang node agent: NVML inventory (real and simulated), process supervisor, coordinator link."""


def labgang_version() -> str:
    """The installed labgang version (``0+unknown`` when run from a source tree that was never installed).

    The agent, the coordinator and the CLI all report this one value (the link's version
    handshake compares it).
    """
    # Imported here, not at the top: importlib.metadata costs tens of milliseconds, and every
    # `labgang` command imports this package (its paths) without needing the version.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("labgang")
    except PackageNotFoundError:
        return "0+unknown"
