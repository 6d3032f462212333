"""The user API's client side: how the CLI and the TUI find and reach a coordinator (discovery,
the synchronous and asyncio clients, the HTTP/1.1 wire, the API's JSON). The server side (routes,
handlers, the application's typed AppKeys) is launcher/coordinator/."""
