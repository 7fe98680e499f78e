"""The API server's binding ceiling: a binder that makes no decision at all.

It watches pending pods of one scheduler name and binds each to the next node round-robin
through ``POST pods/{name}/binding``, with the same client library tierra's scheduler uses
(``tierra.kube.client.Kube``) and the same concurrency (64 bindings in flight). Whatever
pods/s it reaches is what this API server, on this machine, takes: a scheduler's figure as a
share of it says how much of the rest is the scheduler's own work.

Run by ``bench/kube_scheduler_compare.py`` as a process of its own (like each scheduler):

    python bench/noop_binder.py --kubeconfig FILE --scheduler-name noop [--concurrency 64]

It runs until it is stopped; it prints nothing but errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from tierra.kube.client import ApiError, Kube, Limits, load_configuration
from tierra.kube.resources import NODES, PODS


def _pending(pod: dict[str, Any], scheduler_name: str) -> bool:
    spec = pod.get("spec", {})
    return spec.get("schedulerName") == scheduler_name and not spec.get("nodeName")


class NoopBinder:
    """Round-robin over the nodes; every pending pod is bound once, in arrival order."""

    def __init__(self, kube: Kube, scheduler_name: str, concurrency: int) -> None:
        self.kube = kube
        self.scheduler_name = scheduler_name
        self.queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self.seen: set[tuple[str, str]] = set()
        self.nodes: list[str] = []
        self.next = 0
        self.concurrency = concurrency

    async def load_nodes(self) -> None:
        body = await self.kube.get(NODES.path())
        self.nodes = sorted(n["metadata"]["name"] for n in body["items"])
        if not self.nodes:
            raise SystemExit("noop-binder: the cluster has no nodes")

    def offer(self, pod: dict[str, Any]) -> None:
        if not _pending(pod, self.scheduler_name):
            return
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        if key not in self.seen:
            self.seen.add(key)
            self.queue.put_nowait(key)

    async def watch(self) -> None:
        query = {"fieldSelector": f"spec.schedulerName={self.scheduler_name},spec.nodeName="}
        while True:
            listing = await self.kube.get(PODS.path(), query=query)
            for pod in listing["items"]:
                self.offer(pod)
            rv = listing["metadata"]["resourceVersion"]
            try:
                async with self.kube.stream(
                    PODS.path(),
                    query={**query, "watch": True, "resourceVersion": rv},
                    read_timeout=600,
                ) as lines:
                    async for line in lines:
                        event = json.loads(line)
                        if event.get("type") == "ADDED":
                            self.offer(event["object"])
            except ApiError as exc:
                print(f"noop-binder: watch: {exc}", file=sys.stderr)
                await asyncio.sleep(0.5)

    async def bind_forever(self) -> None:
        while True:
            namespace, name = await self.queue.get()
            node = self.nodes[self.next % len(self.nodes)]
            self.next += 1
            body = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            }
            try:
                await self.kube.request("POST", PODS.path(namespace, name, "binding"), body=body)
            except ApiError as exc:
                print(f"noop-binder: bind {namespace}/{name}: {exc}", file=sys.stderr)


async def run(kubeconfig: str, scheduler_name: str, concurrency: int) -> None:
    configuration = await load_configuration(kubeconfig)
    async with Kube(configuration, Limits(max_in_flight=concurrency + 16)) as kube:
        binder = NoopBinder(kube, scheduler_name, concurrency)
        await binder.load_nodes()
        workers = [asyncio.create_task(binder.bind_forever()) for _ in range(concurrency)]
        await asyncio.gather(binder.watch(), *workers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--scheduler-name", default="noop")
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args(argv)
    try:
        asyncio.run(run(args.kubeconfig, args.scheduler_name, args.concurrency))
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
