"""Launchers: docker, process, sim, attach. Each returns a `Server`."""
from pytest_glmf.launch.base import BootError, Launcher, Server

__all__ = ["BootError", "Launcher", "Server"]
