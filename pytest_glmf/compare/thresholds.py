"""The thresholds form of "lane A beats lane B": a curve section's `beats:` list, checked when the
file is read (light: the plugin imports it with the gates' specs).

    lanes:
      daily:
        curve:
          beats:
            - {lane: batch, users: [1, 8]}                      # per_user_tok_s by default
            - {lane: batch, metric: ttft_p95_s, users: [8]}

The ready-made curve suite judges each entry once both lanes have curve rows (this session's, or
the other lane's `<results>/<lane>-latest.json`), with `assert_lane_beats`.
"""
from __future__ import annotations

from typing import Any

from pytest_glmf.config.yamlfile import ConfigError

BEATS_KEYS = ("lane", "metric", "users")


def check_beats(spec: Any, where: str, value: Any) -> None:
    """`beats:` is a list of {lane, metric (a curve metric, default per_user_tok_s), users}."""
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where}: must be a non-empty list like [{{lane: batch, users: [1, 8]}}]")
    for i, entry in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{at}: must be a mapping with keys {', '.join(BEATS_KEYS)}")
        unknown = sorted(set(entry) - set(BEATS_KEYS))
        if unknown:
            raise ConfigError(f"{at}: unknown key {unknown[0]!r}; allowed: {', '.join(BEATS_KEYS)}")
        if not isinstance(entry.get("lane"), str) or not entry["lane"]:
            raise ConfigError(f"{at}.lane: expected the name of the lane this one beats, got {entry.get('lane')!r}")
        metric = entry.get("metric", "per_user_tok_s")
        if metric not in spec.metrics:
            raise ConfigError(f"{at}.metric: {metric!r} is not a curve metric; allowed: "
                              f"{', '.join(sorted(spec.metrics))}")
        users = entry.get("users")
        if users is not None and (not isinstance(users, list) or not users or any(
                isinstance(u, bool) or not isinstance(u, int) or u < 1 for u in users)):
            raise ConfigError(f"{at}.users: expected a non-empty list of positive integers, got {users!r}")
