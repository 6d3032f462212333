"""Names shared by the coordinator's aiohttp application and its callers (AppKeys)."""
