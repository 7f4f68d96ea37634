"""The gates: verdict machinery (`verdict`) and one subpackage per gate."""
