"""One settings type for a load run (issue 41): a gate's settings become a `LoadSettings` by their
names, a lane's timeouts fill what they leave unset, and the workload is made of the same settings."""
from __future__ import annotations

import pytest

from pytest_glmf.gates.capacity.spec import CapacitySettings
from pytest_glmf.gates.curve.spec import CurveRowSettings
from pytest_glmf.load import LOAD_DEFAULTS, LoadSettings, Workload


def test_a_capacity_probe_is_one_load_run_of_its_settings():
    settings = CapacitySettings(runs=2, max_tokens=64, shared_prefix=True, workers=3, client_retries=0,
                                spread_max_pct=7.0, lag_p99_max_s=0.01, client_error_max_pct=4.0, path="/v1/completions")
    load = LoadSettings.of(settings, [8], timeouts={"first_token_s": 5.0}, warmup=False, model="m")
    assert (load.users, load.runs, load.warmup, load.workers, load.client_retries) == ([8], 2, False, 3, 0)
    assert (load.spread_max_pct, load.lag_p99_max_s, load.error_max_pct) == (7.0, 0.01, 4.0)
    assert (load.first_token_timeout_s, load.between_tokens_timeout_s) == (5.0, None)
    # what capacity has no setting for is the load engine's default
    assert (load.cpu_max_frac, load.rate_per_s, load.arrival) == (LOAD_DEFAULTS.cpu_max_frac, None, "uniform")
    assert load.workload(["p"], api_key="k") == Workload(prompts=["p"], max_tokens=64, path="/v1/completions",
                                                         model="m", shared_prefix=True, api_key="k")


def test_a_curve_rows_open_loop_settings_reach_the_load_run():
    load = LoadSettings.of(CurveRowSettings(rate_per_s=4.0, arrival="poisson", cpu_max_frac=0.5), [1, 2])
    assert (load.users, load.rate_per_s, load.arrival, load.cpu_max_frac, load.seed) == ([1, 2], 4.0, "poisson", 0.5, 0)


@pytest.mark.parametrize("kw, message", [({"workers": 0}, "workers must be an integer >= 1 (or unset: auto), got 0"),
                                         ({"arrival": "burst"}, "arrival must be one of uniform, poisson, got 'burst'")])
def test_a_load_run_refuses_what_it_cannot_do(kw, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        LoadSettings(users=[1], **kw)
