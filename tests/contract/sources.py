"""Format strings as written in the released source: the home is pytest_glmf/upgrade/formats.py
(`glmf upgrade` reads a new release's boot lines with it); re-exported for the contract stage."""
from pytest_glmf.upgrade.formats import _PERCENT, find, logged_formats, skeleton_regex, skeletons  # noqa: F401
