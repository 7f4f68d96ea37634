"""Lanes and thresholds files."""
