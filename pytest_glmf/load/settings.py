"""One load run's settings: what every user sends (`Workload`, built from them by `workload`) and how
the client measures it (`LoadSettings`), with their defaults, written once here. A gate that
measures through the load engine names its settings like these and reads their defaults from
`DEFAULTS` (the curve's and capacity's specs); it turns its settings into a `LoadSettings` in one
place (`gates/curve/measure.py`, `gates/capacity/measure.py`).

Plain dataclasses and nothing else: the gates' specs, which the plugin imports on every pytest run,
read the defaults from here.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ARRIVALS = ("uniform", "poisson")      # open loop: every 1/rate s, or a seeded Poisson process
SESSION_LINE_TOKENS = 16
# a lane's `timeouts:` key for each timeout setting (lanes file)
LANE_TIMEOUTS = {"first_token_timeout_s": "first_token_s", "between_tokens_timeout_s": "between_tokens_s"}


@dataclass
class LoadSettings:
    """How a load run measures `users` (each value a row: a discarded warm pass, then `runs`
    measured runs) and what each request asks for. The timeouts left None are the client's
    (engine/timeouts.py) when the run starts."""

    users: list[int] = field(default_factory=list)
    # what each request asks for (the prompts come with `workload`)
    max_tokens: int = 384                  # output tokens per request (ignore_eos: each produces them all)
    path: str = "/v1/chat/completions"     # the streamed endpoint (chat or plain completions)
    model: str | None = None               # None: the server's first model (/v1/models)
    continuous_usage: bool = False         # vLLM: usage on every chunk, makes chunk counts exact
    shared_prefix: bool = False            # every user sends the same prompt, a unique line last
    # how a row is measured
    runs: int = 3
    warmup: bool = True
    rate_per_s: float | None = None        # open loop: requests arrive at this total rate
    arrival: str = "uniform"               # open loop: "uniform" (every 1/rate s) or "poisson" (seeded)
    seed: int = 0                          # of the Poisson arrivals (run k draws with seed + k)
    spread_max_pct: float = 5.0
    client_error_max_pct: float | None = None   # None: spread_max_pct
    lag_p99_max_s: float = 0.002
    cpu_max_frac: float = 0.85
    workers: int | None = None             # client worker processes; None: auto (workers.auto_workers)
    client_retries: int = 2                # runs measured again where the client did not measure
    first_token_timeout_s: float | None = None       # None: the client's (engine/timeouts.py)
    between_tokens_timeout_s: float | None = None
    flush_cache: bool = True
    metrics_sample_s: float = 0.2          # /metrics running/queued sampling during a run (0: off)
    lag_probe_s: float = 0.001             # the lag probe's interval: a read can be late by its lag max + this
    kernel_stamps: bool = True             # kernel receive times where available (http.py)

    @property
    def error_max_pct(self) -> float:
        """How far (%) the client's timestamps may move a run's numbers (selfcheck.client_check)."""
        return self.spread_max_pct if self.client_error_max_pct is None else self.client_error_max_pct

    def __post_init__(self) -> None:
        if self.workers is not None and (isinstance(self.workers, bool) or not isinstance(self.workers, int)
                                         or self.workers < 1):
            raise ValueError(f"workers must be an integer >= 1 (or unset: auto), got {self.workers!r}")
        if self.arrival not in ARRIVALS:
            raise ValueError(f"arrival must be one of {', '.join(ARRIVALS)}, got {self.arrival!r}")

    @classmethod
    def of(cls, settings: Any, users: Sequence[int] = (), *, timeouts: Mapping[str, float] | None = None,
           **overrides: Any) -> "LoadSettings":
        """A gate's settings as a load run's: each of its settings named like one of these is taken
        as it is (the curve's and capacity's settings share the names and the defaults), then
        `overrides`. A timeout the settings leave unset comes from the lane's `timeouts`
        (first_token_s, between_tokens_s), else the client's."""
        names = {f.name for f in dataclasses.fields(cls)} - {"users"}
        given = {name: getattr(settings, name) for name in names if hasattr(settings, name)}
        for key, lane_key in LANE_TIMEOUTS.items():
            if given.get(key) is None and (timeouts or {}).get(lane_key) is not None:
                given[key] = float(timeouts[lane_key])   # type: ignore[index]
        return cls(users=list(users), **{**given, **overrides})

    def workload(self, prompts: list[str], *, system: str | None = None, api_key: str | None = None,
                 prompt_tokens: int | None = None) -> "Workload":
        """What every user sends under these settings: the one place a Workload is made of settings.
        `prompt_tokens`: the longest prompt as the server's /tokenize counted it (fit_prompts)."""
        return Workload(prompts=prompts, max_tokens=self.max_tokens, path=self.path, model=self.model,
                        continuous_usage=self.continuous_usage, shared_prefix=self.shared_prefix,
                        system=system, api_key=api_key, prompt_tokens=prompt_tokens)


DEFAULTS = LoadSettings()


@dataclass
class Workload:
    """What every user sends. Prompts are variants; each request also starts with a unique session
    line so no two requests (in a run or across runs) share a cacheable prefix beyond the template.
    With `shared_prefix` every user sends the first prompt and the unique line comes last: the
    recipe's "every user sent the same briefing", which a prefix cache computes and stores once."""

    prompts: list[str]
    max_tokens: int = DEFAULTS.max_tokens
    path: str = DEFAULTS.path
    model: str | None = DEFAULTS.model
    system: str | None = None
    extra_body: dict[str, Any] = field(default_factory=lambda: {"ignore_eos": True, "temperature": 0.0})
    continuous_usage: bool = DEFAULTS.continuous_usage
    api_key: str | None = None
    shared_prefix: bool = DEFAULTS.shared_prefix
    prompt_tokens: int | None = None    # the longest prompt, counted by the server's /tokenize (fitted)

    def body(self, tag: str, user: int, variant: int) -> dict[str, Any]:
        opts: dict[str, Any] = {"include_usage": True}
        if self.continuous_usage:
            opts["continuous_usage_stats"] = True
        body: dict[str, Any] = {"model": self.model or "default", "max_tokens": self.max_tokens,
                                "stream": True, "stream_options": opts, **self.extra_body}
        session = f"Session {tag}-u{user}."
        chat = self.path.endswith("chat/completions")
        if self.shared_prefix:
            # the shared text leads; in chat it is the system message (what a product shares
            # between users), the user's own turn is the unique line
            shared = "\n\n".join(p for p in (self.system, self.prompts[0]) if p)
            if chat:
                body["messages"] = [{"role": "system", "content": shared},
                                    {"role": "user", "content": f"{session} Answer the task above."}]
            else:
                body["prompt"] = f"{shared}\n\n{session}"
            return body
        text = f"{session}\n\n{self.prompts[variant % len(self.prompts)]}"
        if chat:
            msgs = ([{"role": "system", "content": self.system}] if self.system else [])
            body["messages"] = msgs + [{"role": "user", "content": text}]
        else:
            body["prompt"] = text
        return body

    def estimated_prompt_tokens(self) -> int:
        return max(len(p) for p in self.prompts) // 4 + 16  # ~4 characters per token until usage says

    def shared_tokens(self, prompt_tokens: float) -> float:
        """Of `prompt_tokens` per request, those every user of a run shares (the session line and
        the chat template's tail, ~16 tokens, are each user's own)."""
        return max(0.0, prompt_tokens - SESSION_LINE_TOKENS) if self.shared_prefix else 0.0
