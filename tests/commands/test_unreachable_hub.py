"""A Hub id that the cache lacks, with no network and ``HF_HUB_OFFLINE`` unset: one request, then one line and exit
status 2, where ``huggingface_hub`` retried with back-off for half a minute; a Hub that answers (a missing repository
too) is left to Transformers. The network is a stand-in transport that counts the requests."""

from __future__ import annotations

import importlib

import huggingface_hub
import pytest
from huggingface_hub import constants
from huggingface_hub.utils import _http

from hf_effattn.commands import main as cli
from hf_effattn.folders.hub_or_local import check_reachable


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """An empty Hub cache, online, no back-off (a retry's sleep fails the test), and the Hub behind a stand-in
    transport: ``hub(answer)`` routes every request to ``answer(request)``; returns the list of requests made."""
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(_http.time, "sleep", lambda seconds: pytest.fail(f"retried after {seconds}s"))
    http = importlib.import_module(type(huggingface_hub.get_session()).__module__.split(".")[0])  # httpx or a fork
    requests = []

    def route(answer):
        def handle(request):
            requests.append(request)
            return answer(http, request)

        huggingface_hub.set_client_factory(lambda: http.Client(transport=http.MockTransport(handle)))
        return requests

    yield route
    huggingface_hub.set_client_factory(_http.default_client_factory)


def no_network(http, request):
    raise http.ConnectError("[Errno -2] Name or service not known", request=request)


def test_an_uncached_hub_id_without_network_is_one_request_and_one_line(hub, tmp_path, capsys):
    requests = hub(no_network)
    with pytest.raises(SystemExit) as exit:
        cli.main(["convert", "someone/tiny-roberta", "--attention_type", "dba", "--output_dir", str(tmp_path / "out")])
    assert exit.value.code == 2
    assert [request.method for request in requests if "/someone/tiny-roberta/" in str(request.url)] == ["HEAD"]
    assert capsys.readouterr().err == (
        "hf-effattn convert: error: Checkpoint someone/tiny-roberta is not in the Hub cache and the Hub cannot be "
        "reached ([Errno -2] Name or service not known): connect to the network, or give a local folder "
        "(HF_HUB_OFFLINE=1 reads the cache without trying the network).\n")
    assert not (tmp_path / "out").exists()


def test_a_hub_that_answers_is_left_to_transformers(hub):
    requests = hub(lambda http, request: http.Response(404, request=request))
    check_reachable("someone/missing", "Checkpoint")  # a missing repository is Transformers' to report
    assert [str(request.url) for request in requests if "/someone/" in str(request.url)] == [
        f"{constants.ENDPOINT}/someone/missing/resolve/main/config.json"]
