"""labgang launcher: job/queue model, scheduler, coordinator service, CLI, simulator."""
