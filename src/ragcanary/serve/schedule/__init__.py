"""When and how runs happen: jobs, their grid, reloads, judging, targets' clients, run logs."""
