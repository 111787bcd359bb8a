"""The HTTP API and the web pages (``ui/``): routes, the uvicorn server, what requests must pass."""
