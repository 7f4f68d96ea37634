"""The measuring fixtures: each gate's public measurement function, called on the session's server.

    glmf_curve(users, **settings) -> CurveResult        per-user tok/s, TTFT at N users
    glmf_users                                          the users of a @pytest.mark.glmf_users test
    glmf_drift(reference=... | oracle_url=... | oracle_lane=...) -> DriftResult
    glmf_acceptance(classes=None, ...) -> AcceptanceResult
    glmf_tools(scenarios=None, concurrency=1, ...) -> ToolsResult
    glmf_template(reference=None, conversations=None, ...) -> TemplateResult
    glmf_agents(conversations=None, **settings) -> AgentsResult
    glmf_replay(trace=None, **settings) -> ReplayResult  a trace window replayed open loop

Each fixture is a function the test calls with explicit arguments; it hands off to the plain
function of `pytest_glmf.gates.<gate>` (which scripts call the same way) with what the session
knows: the server's URL and engine, the lane's boot facts, timeouts and simulator time scale, and
how the lane is measured (its gate's `settings:` in the thresholds file, e.g. curve runs and
client self-check, the tool_choice a model needs, the chat template, the oracle's URL); the
call's arguments come on top. What it measured goes to the session's result file (so baselines
compare it and the end-of-session tables show it); `result.table()` is the gate's table.
A test using glmf_curve, glmf_drift or glmf_acceptance measures alone (it is marked
`glmf_serial`). The gates' assertion helpers count every check they evaluate (gates/verdict.py),
which is what the session's "nothing was verified" rule reads (plugin/verified.py).
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.bounds import caller_source
from pytest_glmf.plugin.progress import live_progress
from pytest_glmf.plugin.session import session_of

if TYPE_CHECKING:
    from pytest_glmf.config.lanes import LaneConfig
    from pytest_glmf.config.thresholds import Thresholds
    from pytest_glmf.gates.acceptance.api import AcceptanceResult
    from pytest_glmf.gates.curve.api import CurveResult
    from pytest_glmf.gates.drift.api import DriftResult
    from pytest_glmf.gates.template.api import TemplateResult
    from pytest_glmf.gates.tools.api import ToolsResult
    from pytest_glmf.launch.base import Server
    from pytest_glmf.results.recorder import SessionRecorder

USERS_MARKER = ("glmf_users(*users): measure this test's curve at each users value, one test per value "
                "(ids users=N); the glmf_users fixture holds the value and glmf_curve() uses it")
# Speed (curve, acceptance, capacity) and exact numerics (drift) must not share the server with other tests.
SERIAL_FIXTURES = ("glmf_curve", "glmf_acceptance", "glmf_drift", "glmf_agents", "glmf_replay", "glmf_capacity")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", USERS_MARKER)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    mark = metafunc.definition.get_closest_marker("glmf_users")
    if mark is None:
        return
    users = mark.args
    # a collection error names the test and stops the run before any server boots
    if mark.kwargs or not users or any(isinstance(u, bool) or not isinstance(u, int) or u < 1 for u in users):
        raise pytest.Collector.CollectError(f"{metafunc.definition.nodeid}: glmf_users takes positive integers, "
                                            f"e.g. @pytest.mark.glmf_users(1, 8, 48); got {mark}")
    if "glmf_users" not in metafunc.fixturenames:
        raise pytest.Collector.CollectError(f"{metafunc.definition.nodeid}: glmf_users marks a test that measures no "
                                            "curve: use the glmf_curve fixture (or glmf_users itself)")
    metafunc.parametrize("glmf_users", list(users), ids=[f"users={u}" for u in users])


@pytest.hookimpl(tryfirst=True)  # before the plugin turns glmf_serial into an xdist group
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        if item.get_closest_marker("glmf_serial") is None and any(f in names for f in SERIAL_FIXTURES):
            item.add_marker(pytest.mark.glmf_serial)


# ---------------------------------------------------------------------------- helpers


def _setup_error(fixture: str, source: str | None, exc: Exception) -> str:
    """A setting the measurement cannot use: named where it was set (a thresholds file's section,
    else the test line that called the fixture)."""
    if source:
        return f"{source}: {exc}"

    return f"{fixture}() at {caller_source()}: {exc}"


def _time_scale(lane: "LaneConfig") -> float:
    return float(lane.time_scale) if lane.launcher == "sim" else 1.0


def _fail_unless_measured(call: Callable[[], Any], fixture: str, source: str | None) -> Any:
    """The measurement's result; a setting or input file it cannot use fails the test with one
    line naming it (no traceback of the plugin's internals)."""
    __tracebackhide__ = True
    try:
        return call()
    except ConnectionError:   # the server's, not a setting's: the plugin names it (plugin/faults.py)
        raise
    except (ConfigError, OSError, ValueError, KeyError, RuntimeError) as exc:
        message = _setup_error(fixture, source, exc)
    pytest.fail(message, pytrace=False)   # outside the except: no "During handling..." echo


# ---------------------------------------------------------------------------- curve


@pytest.fixture
def glmf_users(request: pytest.FixtureRequest) -> int | None:
    """The users value of a `@pytest.mark.glmf_users(...)` test (None without the marker)."""
    return getattr(request, "param", None)


@pytest.fixture
def glmf_curve(request: pytest.FixtureRequest, glmf_server: "Server", glmf_lane: "LaneConfig",
               glmf_thresholds: "Thresholds", glmf_results: "SessionRecorder",
               glmf_users: int | None) -> Callable[..., "CurveResult"]:
    """`glmf_curve(users=None, *, settings=None, key=None, **settings_kw)` measures the curve on the
    session's server (`pytest_glmf.gates.curve.measure_curve`) and returns its rows. `users`: an
    int or a list (default: the test's `glmf_users` marker value). Settings: the lane's
    `curve.settings` (or `settings=`), the keyword arguments on top (`prompt_file=`,
    `max_tokens=`, `runs=`...). Each row is recorded under `key` (default: the test's name and
    the users value)."""
    from pytest_glmf.gates.curve.api import measure_curve
    from pytest_glmf.gates.curve.endpoints import server_endpoints
    from pytest_glmf.gates.curve.workers import WorkerError

    def measure(users: int | list[int] | None = None, *, settings: Any = None, key: str | None = None,
                source: str | None = None, **settings_kw: Any) -> "CurveResult":
        __tracebackhide__ = True
        users = glmf_users if users is None else users
        if users is None:
            pytest.fail("glmf_curve() needs users: glmf_curve(8), or mark the test @pytest.mark.glmf_users(8)",
                        pytrace=False)
        base = settings if settings is not None else glmf_thresholds.settings(glmf_lane.name, "curve")
        # several replicas: each one's boot facts, seats summed; streams dealt round-robin over their URLs
        urls, facts = server_endpoints(glmf_server)

        def run() -> "CurveResult":
            try:
                return measure_curve(urls, users, settings=base, boot_facts=facts, timeouts=glmf_lane.timeouts,
                                     time_scale=_time_scale(glmf_lane), progress=live_progress(request.config),
                                     **settings_kw)
            except WorkerError as exc:   # the client failed, not a setting: said as the suite always said it
                pytest.fail(f"curve of lane {glmf_lane.name!r} @ {users} users: client workers failed: {exc}",
                            pytrace=False)

        result = _fail_unless_measured(run, "glmf_curve", source)
        result.lane = glmf_lane.name
        for row in result.rows:
            row.lane = glmf_lane.name
            if key is not None:
                name = key if len(result.rows) == 1 else f"{key} users={row.users}"
            else:
                name = request.node.name if f"users={row.users}" in request.node.name \
                    else f"{request.node.name} users={row.users}"
            glmf_results.record("curve", name, row.to_record())
        return result

    return measure


# ---------------------------------------------------------------------------- tools


@pytest.fixture
def glmf_tools(request: pytest.FixtureRequest, glmf_server: "Server", glmf_lane: "LaneConfig",
               glmf_thresholds: "Thresholds", glmf_results: "SessionRecorder") -> Callable[..., "ToolsResult"]:
    """`glmf_tools(scenarios=None, *, concurrency=1, tool_choice=None, strict=None, key=None)` asks
    every turn of `scenarios` (your YAML file, a list of Scenario, or None: the packaged set) on
    the session's server (`pytest_glmf.gates.tools.measure_tools`) and returns the counts.
    `tool_choice`, `strict` and `max_tokens` default to the lane's `tools.settings`. Recorded under `key`
    (default: the test's name and the concurrency)."""
    from pytest_glmf.gates.tools.api import measure_tools

    def measure(scenarios: Any = None, *, concurrency: int = 1, tool_choice: str | None = None,
                strict: bool | None = None, key: str | None = None, source: str | None = None,
                **kw: Any) -> "ToolsResult":
        __tracebackhide__ = True
        lane_settings = glmf_thresholds.settings(glmf_lane.name, "tools")
        result = _fail_unless_measured(lambda: measure_tools(
            glmf_server.base_url, scenarios, concurrency=concurrency,
            tool_choice=tool_choice if tool_choice is not None else lane_settings.tool_choice,
            strict=strict if strict is not None else lane_settings.strict, timeouts=glmf_lane.timeouts,
            **{"max_tokens": lane_settings.max_tokens, **kw}),
            "glmf_tools", source)
        result.lane = glmf_lane.name
        glmf_results.record("tools", key or f"{request.node.name} users={concurrency}", result.summary())
        return result

    return measure


# ---------------------------------------------------------------------------- template


@pytest.fixture
def glmf_template(request: pytest.FixtureRequest, glmf_server: "Server", glmf_lane: "LaneConfig",
                  glmf_thresholds: "Thresholds", glmf_results: "SessionRecorder") -> Callable[..., "TemplateResult"]:
    """`glmf_template(reference=None, conversations=None, *, served_ids=None, key=None)` renders
    every conversation (your YAML file, or None: the packaged set) through the session's server
    and compares its prompt ids with `reference` (a dict or a file from `glmf template
    reference`; None: the lane's `template.settings.reference`, else the simulator's own
    template, else transformers on the lane's model directory). Skips when the lane has no
    reference. Recorded under `key` (default: the test's name)."""
    from pytest_glmf.gates.template.api import measure_template
    from pytest_glmf.gates.template.conversations import load_conversations
    from pytest_glmf.gates.template.reference import reference_for_lane
    from pytest_glmf.gates.template.special import lane_skip_special_default

    def measure(reference: Any = None, conversations: Any = None, *, served_ids: str | None = None,
                key: str | None = None, source: str | None = None) -> "TemplateResult":
        __tracebackhide__ = True
        s = glmf_thresholds.settings(glmf_lane.name, "template")
        where = source or (glmf_thresholds.source(glmf_lane.name, "template")
                           if glmf_thresholds.for_gate(glmf_lane.name, "template") else None)
        convs = _fail_unless_measured(lambda: load_conversations(conversations or s.conversations),
                                      "glmf_template", where)
        if reference is None:
            reference = _fail_unless_measured(lambda: reference_for_lane(
                glmf_lane, s.reference, s.python, glmf_thresholds.path, convs), "glmf_template", where)
        if reference is None:
            pytest.skip(f"lane {glmf_lane.name!r}: no template reference; set lanes.{glmf_lane.name}.template."
                        f"settings.reference (a file from `glmf template reference --url KNOWN_GOOD`) in "
                        f"{glmf_thresholds.path}, or name a local model directory in the lane")
        result = _fail_unless_measured(lambda: measure_template(
            glmf_server.base_url, reference, convs, served_ids=served_ids or s.served_ids,
            context_tokens=s.context_tokens, timeouts=glmf_lane.timeouts,
            skip_special_tokens_default=lane_skip_special_default(glmf_lane)), "glmf_template", where)
        result.lane = glmf_lane.name
        glmf_results.record("template", key or request.node.name, result.summary())
        return result

    return measure


# ---------------------------------------------------------------------------- agents


@pytest.fixture
def glmf_agents(request: pytest.FixtureRequest, glmf_server: "Server", glmf_lane: "LaneConfig",
                glmf_thresholds: "Thresholds", glmf_results: "SessionRecorder") -> Callable[..., Any]:
    """`glmf_agents(conversations=None, *, settings=None, key=None, **settings_kw)` runs agents'
    sessions on the session's server (`pytest_glmf.gates.agents.measure_agents`): your sessions
    YAML, a list of Session, or None (the lane's `agents.settings`: a sessions_file or the
    template). Recorded under `key` (default: the test's name)."""
    from pytest_glmf.gates.agents.api import measure_agents

    def measure(conversations: Any = None, *, settings: Any = None, key: str | None = None,
                source: str | None = None, **settings_kw: Any) -> Any:
        __tracebackhide__ = True
        base = settings if settings is not None else glmf_thresholds.settings(glmf_lane.name, "agents")
        result = _fail_unless_measured(lambda: measure_agents(
            glmf_server.base_url, conversations, settings=base, timeouts=glmf_lane.timeouts,
            time_scale=_time_scale(glmf_lane), **settings_kw), "glmf_agents", source)
        result.lane = glmf_lane.name
        glmf_results.record("agents", key or request.node.name, result.to_record())
        return result

    return measure


@pytest.fixture
def glmf_replay(request: pytest.FixtureRequest, glmf_server: "Server", glmf_lane: "LaneConfig",
                glmf_thresholds: "Thresholds", glmf_results: "SessionRecorder") -> Callable[..., Any]:
    """`glmf_replay(trace=None, *, settings=None, key=None, **settings_kw)` replays a trace window
    open loop on the session's server (`pytest_glmf.gates.agents.replay.measure_replay`): a trace
    file, the packaged slice's name, a Trace, or None (the lane's `agents.replay` block; a relative
    trace path there is read beside the thresholds file). Recorded under `key` (default: the
    test's name); judge it with `assert_replay`."""
    from pytest_glmf.gates.agents.replay import measure_replay, trace_path
    from pytest_glmf.gates.agents.spec import replay_parts

    def measure(trace: Any = None, *, settings: Any = None, key: str | None = None, source: str | None = None,
                **settings_kw: Any) -> Any:
        __tracebackhide__ = True
        block = glmf_thresholds.for_gate(glmf_lane.name, "agents").get("replay")
        where = f"{glmf_thresholds.source(glmf_lane.name, 'agents')}.replay"
        if settings is None:
            settings = replay_parts(block, where)[0] if block is not None else None
            if settings is not None and trace is None:
                trace = trace_path(settings.trace, glmf_thresholds.path)
        result = _fail_unless_measured(lambda: measure_replay(
            glmf_server.base_url, trace, settings=settings, timeouts=glmf_lane.timeouts,
            time_scale=_time_scale(glmf_lane), progress=live_progress(request.config), **settings_kw),
            "glmf_replay", source)
        result.lane = glmf_lane.name
        glmf_results.record("agents", key or request.node.name, result.to_record())
        return result

    return measure


# ---------------------------------------------------------------------------- acceptance


@pytest.fixture(scope="session")
def glmf_acceptance(glmf_server: "Server", glmf_lane: "LaneConfig", glmf_thresholds: "Thresholds",
                    glmf_results: "SessionRecorder") -> Callable[..., "AcceptanceResult"]:
    """`glmf_acceptance(classes=None, *, prompts_per_class=None, max_tokens_scale=None, template=None,
    key="")` measures speculative acceptance per prompt class (your YAML file, a list of
    PromptClass, or None: the packaged seven) on the session's server
    (`pytest_glmf.gates.acceptance.measure_acceptance`), one request at a time; what is not
    given comes from the lane's `acceptance.settings`. Measured once per session per distinct
    arguments (later calls return the same result); each class is recorded under `key` + its name.
    A server that says it runs no speculative decoding (SGLang's /server_info
    `speculative_algorithm: null`, engine/serverconfig.py) is not measured: the test skips with
    the server's words, or fails with them when the lane declares a `spec`."""

    from pytest_glmf.gates.acceptance.api import measure_acceptance

    measured: dict[tuple[Any, ...], AcceptanceResult] = {}

    def measure(classes: Any = None, *, key: str = "", source: str | None = None, **kw: Any) -> "AcceptanceResult":
        __tracebackhide__ = True
        why = glmf_server.config.why_no_speculation()
        if why and glmf_lane.speculative:
            pytest.fail(f"lane {glmf_lane.name!r} declares spec: {glmf_lane.spec}, but the server {why}: "
                        "its speculative flags did not take effect", pytrace=False)
        if why:
            pytest.skip(f"the server of lane {glmf_lane.name!r} runs no speculative decoding ({why}): "
                        "no acceptance to measure")
        lane_settings = dataclasses.asdict(glmf_thresholds.settings(glmf_lane.name, "acceptance"))
        args = {**lane_settings, **{k: v for k, v in kw.items() if v is not None}}
        cache_key = (repr(classes), *sorted((k, repr(v)) for k, v in args.items()))
        if cache_key not in measured:
            result = _fail_unless_measured(lambda: measure_acceptance(
                glmf_server.base_url, classes, engine=glmf_server.engine, timeouts=glmf_lane.timeouts, **args),
                "glmf_acceptance", source)
            result.lane = glmf_lane.name
            measured[cache_key] = result
        result = measured[cache_key]
        # one row per class (and the mean), as the report renders them; the raw requests beside them
        for row in [*result.classes, result.mean]:
            glmf_results.record("acceptance", f"{key}{row.name}",
                                row.to_record(f"{result.source}; {result.prompt_format}"))
        glmf_results.record("acceptance", f"{key}requests", result.records)
        return result

    return measure


# ---------------------------------------------------------------------------- drift


@dataclasses.dataclass(frozen=True)
class DriftReferenceKey:
    """What one oracle reference depends on: calls that differ only in how they judge (self-check
    mode, label, tokenizer check) score against the same reference."""
    reference: str | None            # a stored reference's sha256 or path
    oracle_url: str | None
    oracle_lane: str
    workload: tuple[tuple[str, str], ...]
    engine: str | None


@dataclasses.dataclass(frozen=True)
class DriftMeasurementKey:
    """What one drift measurement depends on: its reference and how it is judged."""
    reference: DriftReferenceKey
    check_tokenizer: bool
    label: str
    judging: tuple[tuple[str, Any], ...]


@pytest.fixture(scope="session")
def glmf_drift(pytestconfig: pytest.Config, glmf_server: "Server", glmf_lane: "LaneConfig",
               glmf_thresholds: "Thresholds", glmf_results: "SessionRecorder") -> Callable[..., "DriftResult"]:
    """`glmf_drift(reference=None, *, oracle_url=None, oracle_lane=None, prompts=None, prompt_file=None,
    max_tokens=None, k=None, oracle_engine=None, check_tokenizer=None, label=None, key=None,
    record=True, self_check=None, score_concurrency=None, answer_max_tokens=None)` scores the
    session's server against an oracle reference
    (`pytest_glmf.gates.drift.measure_drift`): a stored reference (a file or dict), one made now
    on `oracle_url`, or on `oracle_lane` (a lane of the lanes file, launched and stopped for it).
    Given none, the lane's `drift.settings.oracle_url`, else a simulator lane's own oracle (the
    original checkpoint). `k`, `check_tokenizer` and `oracle_engine` default to the lane's drift
    settings, the workload (`prompts`, `prompt_file`, `max_tokens`) to the gate's; `self_check`,
    `score_concurrency` and `answer_max_tokens` (greedy chat answers) to the lane's. Measured once
    per session per distinct arguments; reference and candidate files go to <results>/drift/,
    the numbers under `key` (default: the label, i.e. the lane's name, and the prompt file's
    name when one is given; `record=False`: not recorded by this call, e.g. by a fixture
    measuring for several tests)."""
    from pytest_glmf.gates.drift.api import load_drift_reference, make_drift_reference, measure_drift
    from pytest_glmf.gates.drift.oracle import reference_from_lane, resolve_oracle_lane
    from pytest_glmf.gates.drift.reference import sim_template

    measured: dict[DriftMeasurementKey, DriftResult] = {}
    references: dict[DriftReferenceKey, dict[str, Any]] = {}
    out_dir = glmf_results.results_dir / "drift"
    session = session_of(pytestconfig)
    lanes_file = session.settings.lanes_file if session is not None else None

    def reference_for(reference: Any, oracle_url: str | None, oracle_lane: Any, workload: dict[str, Any],
                      engine: str | None, key: str) -> dict[str, Any]:
        if reference is not None:
            return dict(reference) if isinstance(reference, dict) else load_drift_reference(reference)
        if oracle_url is not None:
            ref = make_drift_reference(oracle_url, engine=engine, timeouts=glmf_lane.timeouts, **workload)
        else:
            lane = resolve_oracle_lane(oracle_lane, glmf_lane, lanes_file)
            ref = reference_from_lane(lane, glmf_results.results_dir, glmf_results.session_id, **workload)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"{key}-reference.json").write_text(json.dumps(ref) + "\n")
        return ref

    def measure(reference: Any = None, *, oracle_url: str | None = None, oracle_lane: Any = None,
                prompts: int | None = None, prompt_file: Any = None, max_tokens: int | None = None,
                k: int | None = None, oracle_engine: str | None = None, check_tokenizer: bool | None = None,
                label: str | None = None, key: str | None = None, source: str | None = None,
                record: bool = True, self_check: str | None = None, score_concurrency: int | None = None,
                answer_max_tokens: int | None = None) -> "DriftResult":
        __tracebackhide__ = True
        given = [n for n, v in (("reference", reference), ("oracle_url", oracle_url), ("oracle_lane", oracle_lane))
                 if v is not None]
        if len(given) > 1:
            pytest.fail(f"glmf_drift(): one oracle at a time, got {' and '.join(given)}", pytrace=False)
        lane_settings = glmf_thresholds.settings(glmf_lane.name, "drift")
        if not given:
            oracle_url = lane_settings.oracle_url
        k = k if k is not None else lane_settings.k
        check_tokenizer = check_tokenizer if check_tokenizer is not None else lane_settings.check_tokenizer
        engine = oracle_engine or lane_settings.oracle_engine
        score_concurrency = score_concurrency or lane_settings.score_concurrency
        answer_max_tokens = answer_max_tokens or lane_settings.answer_max_tokens
        workload = {n: v for n, v in (("prompts", prompts), ("prompt_file", prompt_file), ("max_tokens", max_tokens),
                                      ("k", k), ("score_concurrency", score_concurrency),
                                      ("answer_max_tokens", answer_max_tokens),
                                      ("answer_prompts", lane_settings.answer_prompts)) if v is not None}
        judging = {"self_check": self_check or lane_settings.self_check, "score_concurrency": score_concurrency,
                   "agreement_tokens": lane_settings.agreement_tokens}
        label = label or glmf_lane.name
        # your own prompt set is not the lane's: its numbers must not meet the suite's in a baseline
        key = key or (f"{label} ({Path(prompt_file).name})" if prompt_file is not None else label)
        ref_id = reference.get("sha256") if isinstance(reference, dict) else str(reference)
        ref_key = DriftReferenceKey(ref_id, oracle_url, str(oracle_lane),
                                    tuple(sorted((n, str(v)) for n, v in workload.items())), engine)
        cache_key = DriftMeasurementKey(ref_key, check_tokenizer, label, tuple(sorted(judging.items())))
        if cache_key not in measured:
            def run() -> "DriftResult":
                if ref_key not in references:
                    references[ref_key] = reference_for(reference, oracle_url, oracle_lane, workload, engine, key)
                ref = references[ref_key]
                return measure_drift(glmf_server.base_url, ref, label=label, engine=glmf_server.engine,
                                     check_tokenizer=check_tokenizer, timeouts=glmf_lane.timeouts,
                                     provenance={"lane": glmf_lane.name, **glmf_server.provenance},
                                     template=sim_template() if glmf_lane.launcher == "sim" else None, **judging)

            result = _fail_unless_measured(run, "glmf_drift", source)
            result.lane = glmf_lane.name
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / f"{key}-{glmf_results.session_id}-candidate.json").write_text(json.dumps(result.candidate) + "\n")
            measured[cache_key] = result
        result = measured[cache_key]
        if record:
            glmf_results.record("drift", key, result.to_record())
        return result

    return measure
