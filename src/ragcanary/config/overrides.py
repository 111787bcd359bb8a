"""``RAGCANARY_*`` variables read by pydantic-settings; ``environment.overrides`` is the way in."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from ragcanary.config.environment import PREFIX


class EnvOverrides(BaseSettings):
    """Top-level settings the environment overrides: ``RAGCANARY_STORAGE`` beats ``storage:``."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, env_ignore_empty=True)

    storage: str | None = None
    listen: str | None = None
    log_level: str | None = None
    log_format: str | None = None
    admin_token: str | None = None
    ingest_token: str | None = None
    ui_url: str | None = None
    runbook_base_url: str | None = None

    @classmethod
    def read(cls, environ: Mapping[str, str]) -> dict[str, str]:
        """The overrides set in ``environ`` (not ``os.environ``), keyed by config field."""
        found = _EnvironSource(cls, environ)()
        return {name: value for name, value in found.items() if isinstance(value, str)}


class _EnvironSource(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping instead of ``os.environ``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        # Normalised as the source does os.environ: names case-insensitive, empty means unset.
        self.env_vars = {name.lower(): value for name, value in environ.items() if value}
