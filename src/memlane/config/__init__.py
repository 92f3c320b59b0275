"""Configuration: one frozen `Settings`, loaded from defaults, a TOML file, env and flags."""

from memlane.config.loader import ConfigError, LoadedSettings, effective_values, load_settings
from memlane.config.settings import Settings

__all__ = ["ConfigError", "LoadedSettings", "Settings", "effective_values", "load_settings"]
