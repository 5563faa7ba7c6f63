"""The kubeconfig loaders' credential refresh hook runs at most every REFRESH_EVERY seconds
(taskfsm.kube.client): before, it ran before every request and re-applied the kubeconfig."""

from __future__ import annotations

import time

from taskfsm.kube import client as kube_client


def test_the_refresh_hook_runs_at_most_once_per_interval():
    calls: list[float] = []
    refresh = kube_client._throttled(lambda _conf: calls.append(time.monotonic()), 0.2)
    conf = kube_client.Configuration()
    for _ in range(50):
        refresh(conf)
    assert len(calls) == 1
    time.sleep(0.25)
    refresh(conf)
    assert len(calls) == 2


def test_configured_clients_get_the_throttled_hook_and_still_refresh():
    calls: list[object] = []
    conf = kube_client.Configuration()
    conf.host = "https://127.0.0.1:1"
    conf.refresh_api_key_hook = calls.append
    api = kube_client.configured(conf)
    for _ in range(20):
        api.configuration.get_api_key_with_prefix("BearerToken")
    assert calls == [conf]  # once, with the configuration, not 20 times


def test_a_client_without_a_hook_keeps_none():
    conf = kube_client.Configuration()
    kube_client.configured(conf)
    assert conf.refresh_api_key_hook is None


def test_a_hook_that_installs_itself_again_stays_throttled():
    """The kubeconfig loader's hook sets ``refresh_api_key_hook`` anew each time it runs."""
    calls: list[int] = []
    conf = kube_client.Configuration()

    def loader_hook(configuration: kube_client.Configuration) -> None:
        calls.append(1)
        configuration.refresh_api_key_hook = loader_hook

    conf.refresh_api_key_hook = loader_hook
    kube_client.configured(conf)
    for _ in range(20):
        conf.get_api_key_with_prefix("BearerToken")
    assert len(calls) == 1
    assert conf.refresh_api_key_hook is not loader_hook
