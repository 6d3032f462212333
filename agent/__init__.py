"""labgang node agent: NVML inventory (real and simulated), process supervisor, coordinator link."""
