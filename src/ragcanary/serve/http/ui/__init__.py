"""The investigation pages under /ui/: server-rendered HTML, templates and assets in the package."""
