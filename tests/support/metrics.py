"""Scraping a running process's ``/metrics`` over HTTP and reading the samples (prometheus_client's parser)."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample


@dataclass
class Scrape:
    """The samples of one scrape, by sample name (``sievemq_messages_in_total``, ``..._bucket``)."""

    text: str
    samples: dict[str, list[Sample]]
    families: list[str]
    """Family names in the order exposed (a name twice would be a broken exposition)."""

    def find(self, name: str, **labels: str) -> list[Sample]:
        """Samples of ``name`` whose labels include ``labels``."""
        return [s for s in self.samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())]

    def value(self, name: str, **labels: str) -> float:
        """The one sample of ``name`` with exactly these labels (besides none other than ``le``); AssertionError when
        there is none or several."""
        found = [s for s in self.find(name, **labels) if set(s.labels) - {"le"} == set(labels) - {"le"}]
        if len(found) != 1:
            raise AssertionError(f"{len(found)} samples of {name} {labels}: {self.samples.get(name, [])[:20]}")
        return float(found[0].value)

    def get(self, name: str, default: float = 0.0, **labels: str) -> float:
        """Like ``value``, ``default`` when there is no such sample."""
        found = [s for s in self.find(name, **labels) if set(s.labels) - {"le"} == set(labels) - {"le"}]
        return float(found[0].value) if found else default

    def total(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels``."""
        return float(sum(s.value for s in self.find(name, **labels)))


def fetch(url: str, timeout: float = 5.0) -> tuple[int, str, str]:
    """GET ``url``: (status, content type, text)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def parse(text: str) -> Scrape:
    """A ``Scrape`` of exposition text."""
    samples: dict[str, list[Sample]] = {}
    names = []
    for family in text_string_to_metric_families(text):
        names.append(family.name)
        for s in family.samples:
            samples.setdefault(s.name, []).append(s)
    return Scrape(text, samples, names)


async def scrape(base_url: str) -> Scrape:
    """GET ``base_url/metrics`` (from a thread: the test's loop keeps running) and parse it."""
    status, _, text = await asyncio.to_thread(fetch, base_url + "/metrics")
    assert status == 200, f"/metrics answered {status}: {text[:500]}"
    return parse(text)
