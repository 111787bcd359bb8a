"""ragcanary: canary queries against a live retriever, scored exactly and watched for drift."""

__version__ = "0.1.0"
