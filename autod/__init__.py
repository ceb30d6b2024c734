"""autod: an autonomous developer daemon (`autod --help`)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("autod")
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "unknown (not installed)"
