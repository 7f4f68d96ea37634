"""The plugin's options, each with an ini twin, resolved CLI > ini > default into one validated `Settings`."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_glmf.config.lanes import LaneConfig, apply_overrides, check_local_volumes, load_lanes, select_lane
from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.plugin.history import DEFAULT_BASELINE_RUNS, DEFAULT_DRIFT_WINDOW, HistorySettings, resolve_history
from pytest_glmf.results.recorder import SCHEMA

# name -> (metavar, help, ini default). 'Help' formatting (same rules as pytest's): start with a
# capital letter; a single phrase has no final period.
OPTIONS: dict[str, tuple[str, str, str | None]] = {
    "lane": ("NAME", "Lane to launch and test (a name from the lanes file; built-in: daily, batch); repeat it, or "
             "give 'all', to test several lanes one server at a time and compare them (ini: names separated by "
             "spaces)", None),
    "lanes": ("FILE", "Lanes file (YAML); default: the built-in simulator lanes daily and batch", None),
    "thresholds": ("FILE", "Thresholds file (YAML); default: the thresholds.yaml shipped with pytest-glmf", None),
    "url": ("URL", "Attach to a server already running at URL instead of launching the lane", None),
    "boot_log": ("FILE", "Boot log of the attached server (--glmf-url or a lane with launcher attach): the boot "
                 "gate and the seat checks read it", None),
    "image": ("IMAGE", "Override the lane's container image (docker lanes), e.g. to gate an upgrade; attach lanes: record "
              "the image the server runs", None),
    "results": ("DIR", "Directory for result files and server logs (default: glmf-results in the current directory)", None),
    "baseline": ("FILE", "Result file of a known-good run to compare this session against, or history[:K]: the "
                 f"median of the last K (default {DEFAULT_BASELINE_RUNS}) passing runs in the history store on the same lane, GPU, model "
                 "revision and engine", None),
    "history": ("URL", "History store every session is added to: a SQLite file (default: <results>/history.sqlite), "
                "sqlite:///PATH?timeout=S, postgresql://USER@HOST:PORT/DB, or off", None),
    "history_drift": ("MODE", "Slow-drift check against the history: warn (default), fail or off, optionally :K "
                      f"(compare the last K runs with the K before; default {DEFAULT_DRIFT_WINDOW})", None),
}


@dataclass(frozen=True)
class Settings:
    """The resolved options (CLI > ini > default), validated before anything starts; frozen (a
    lane's own settings are derived with `dataclasses.replace(settings, lane=...)`)."""

    lane: LaneConfig | None
    lanes_file: Path | None
    thresholds_file: Path | None
    url: str | None
    image: str | None
    results_dir: Path
    baseline: Path | None
    update_baseline: bool = False
    html: bool = False                      # --glmf-html: <results>/<lane>-latest.html beside the JSON
    history: HistorySettings | None = None
    lanes: list[LaneConfig] = field(default_factory=list)   # every selected lane (several: one server at a time)


def _option(config: pytest.Config, name: str) -> tuple[str | None, Path, str]:
    """(value, base dir for relative paths, where it came from) for one option: CLI > ini > default."""
    value = config.getoption(f"glmf_{name}")
    if value is not None:
        return value, config.invocation_params.dir, f"--glmf-{name.replace('_', '-')}"
    value = config.getini(f"glmf_{name}") or None
    base = config.inipath.parent if config.inipath else config.rootpath
    return value, base, f"glmf_{name} (ini)"


def _path(config: pytest.Config, name: str, must_exist: bool) -> Path | None:
    value, base, where = _option(config, name)
    if value is None:
        return None
    path = (base / os.path.expanduser(value)).resolve()
    if must_exist and not path.is_file():
        raise pytest.UsageError(f"{where}: {value} is not a file (expected a path to an existing YAML/JSON file)")
    return path


def resolve_settings(config: pytest.Config) -> Settings:
    """All glmf options, validated; raises pytest.UsageError naming the option and the valid forms."""
    lanes_file = _path(config, "lanes", must_exist=True)
    thresholds_file = _path(config, "thresholds", must_exist=True)
    update_baseline = bool(config.getoption("glmf_update_baseline") or config.getini("glmf_update_baseline"))
    html = bool(config.getoption("glmf_html") or config.getini("glmf_html"))
    results_dir = _path(config, "results", must_exist=False) or config.invocation_params.dir / "glmf-results"
    history_required = bool(config.getoption("glmf_history_required") or config.getini("glmf_history_required"))
    history = resolve_history(_option(config, "history"), _option(config, "history_drift"), history_required,
                              _option(config, "baseline"), results_dir)
    baseline = None if history.baseline_runs else _path(config, "baseline", must_exist=not update_baseline)
    if results_dir.exists() and not (results_dir.is_dir() and os.access(results_dir, os.R_OK | os.W_OK | os.X_OK)):
        raise pytest.UsageError(f"--glmf-results: {results_dir} is not a writable directory")
    existing = next(p for p in [results_dir, *results_dir.parents] if p.exists())
    if existing != results_dir and not (existing.is_dir() and os.access(existing, os.W_OK | os.X_OK)):
        raise pytest.UsageError(f"--glmf-results: {results_dir} cannot be created ({existing} is not a "
                                "writable directory)")
    if baseline is not None and baseline.exists():
        from pytest_glmf.results.baseline import BaselineError, load_baseline

        try:  # a baseline that cannot be compared must stop the session before a server starts
            load_baseline(baseline, SCHEMA)
        except BaselineError as exc:
            raise pytest.UsageError(f"--glmf-baseline: {exc}") from None
    url, _, url_where = _option(config, "url")
    if url is not None and not url.startswith(("http://", "https://")):
        raise pytest.UsageError(f"{url_where}: {url!r} is not a URL; expected http://HOST:PORT or https://HOST:PORT")
    image, _, image_where = _option(config, "image")
    if image is not None and (not image.strip() or any(c.isspace() for c in image)):
        raise pytest.UsageError(f"{image_where}: {image!r} is not an image reference; expected e.g. "
                                "lmsysorg/sglang:nightly-dev-cu13-20260911-00143e9c")
    boot_log, boot_log_where = _boot_log(config)
    lane_value, _, lane_where = _option(config, "lane")
    lane = None
    try:
        lanes = load_lanes(lanes_file)
        names = lane_names(lane_value, lanes)
        if len(names) > 1:
            if boot_log is not None:
                raise ConfigError(f"{boot_log_where} is one attached server's boot log; it cannot be the {len(names)} "
                                  f"lanes {', '.join(names)} (set each lane's boot_log: in the lanes file)")
            selected = several_lanes(names, lanes, lanes_file, url_where if url is not None else None,
                                     image_where if image is not None else None, baseline)
            return Settings(lane=selected[0], lanes_file=lanes_file, thresholds_file=thresholds_file, url=url,
                            image=image, results_dir=results_dir, baseline=baseline,
                            update_baseline=update_baseline, history=history, lanes=selected, html=html)
        lane_name = names[0] if names else None
        if lane_name is not None:
            lane = select_lane(lanes, lane_name, str(lanes_file) if lanes_file else "the built-in lanes")
        elif url is not None:
            lane = LaneConfig(name="attach", launcher="attach", url=url, source=url_where)
        elif image is not None:
            raise ConfigError(f"{image_where} needs a lane: pass --glmf-lane NAME (known lanes: {', '.join(lanes)})")
        if lane is not None:
            lane = apply_overrides(lane, url=url, image=image)
            check_local_volumes(lane)
            if boot_log is not None:
                lane = with_boot_log(lane, boot_log, boot_log_where)
        elif boot_log is not None:
            raise ConfigError(f"{boot_log_where} needs an attached server: pass --glmf-url URL (or a lane with "
                              "launcher attach)")
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    return Settings(lane=lane, lanes_file=lanes_file, thresholds_file=thresholds_file, url=url,
                    image=image, results_dir=results_dir, baseline=baseline, update_baseline=update_baseline,
                    history=history, lanes=[lane] if lane is not None else [], html=html)


ALL_LANES = "all"


def _boot_log(config: pytest.Config) -> tuple[str | None, str]:
    """`--glmf-boot-log` / `glmf_boot_log` as an absolute path to a readable file (None: not given)."""
    value, base, where = _option(config, "boot_log")
    if value is None:
        return None, where
    path = (base / os.path.expanduser(value)).resolve()
    if not path.is_file() or not os.access(path, os.R_OK):
        raise pytest.UsageError(f"{where}: {value} is not a readable file (expected the attached server's boot log, "
                                "e.g. the file its stdout went to, or `docker logs NAME > boot.log`)")
    return str(path), where


def with_boot_log(lane: LaneConfig, boot_log: str, where: str) -> LaneConfig:
    """The lane reading `boot_log` as its server's boot log: attach lanes only (a launched server's
    log is the one the launcher writes); one server (replicas take boot_logs: in the lanes file)."""
    from dataclasses import replace

    if lane.launcher != "attach":
        raise ConfigError(f"{where} is for attached servers (--glmf-url, or launcher attach); lane {lane.name!r} "
                          f"({lane.source}) uses launcher {lane.launcher}, whose boot log the plugin writes itself")
    if lane.urls or lane.boot_logs:
        raise ConfigError(f"{where}: lane {lane.name!r} ({lane.source}) has several replicas; give one boot log per "
                          "replica with boot_logs: in the lanes file")
    return replace(lane, boot_log=boot_log)


def lane_names(value: str | list[str] | None, lanes: dict[str, LaneConfig]) -> list[str]:
    """The selected lane names: `--glmf-lane` repeated (a list), or the ini's names separated by
    spaces or commas; `all` is every lane of the lanes file, in its order. Repeats are dropped."""
    if value is None:
        return []
    words = [w for v in ([value] if isinstance(value, str) else value) for w in v.replace(",", " ").split()]
    names: list[str] = []
    for w in words:
        names += list(lanes) if w == ALL_LANES and ALL_LANES not in lanes else [w]
    return list(dict.fromkeys(names))


def several_lanes(names: list[str], lanes: dict[str, LaneConfig], lanes_file: Path | None, url_where: str | None,
                  image_where: str | None, baseline: Path | None) -> list[LaneConfig]:
    """Several lanes in one session: each checked as if selected alone; the options that name one
    server or one lane's run are refused (they cannot mean several)."""
    shown = ", ".join(names)
    if url_where is not None:
        raise ConfigError(f"{url_where} attaches to one server; it cannot be the {len(names)} lanes {shown} "
                          "(select one lane, or give each lane its url: in the lanes file)")
    if image_where is not None:
        raise ConfigError(f"{image_where} replaces one lane's image; with several lanes ({shown}) set each lane's "
                          "image: in the lanes file (a base: lane and a matrix: over image)")
    if baseline is not None:
        raise ConfigError(f"--glmf-baseline {baseline} is one lane's result; with several lanes ({shown}) use "
                          "--glmf-baseline history[:K] (each lane against its own stored runs)")
    source = str(lanes_file) if lanes_file else "the built-in lanes"
    out = []
    for name in names:
        lane = apply_overrides(select_lane(lanes, name, source))
        check_local_volumes(lane)
        out.append(lane)
    return out
